// RunExecCommand: checks every flag against the plan before the first step,
// keeps the median step (by wall time) for the per-stage figures and the
// trace, and runs the references for --verify from a copy of the state
// taken before the first step.
#include "executor/exec_command.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <memory>
#include <sstream>

#include "common/allocator.h"
#include "common/atomic_file.h"
#include "common/cpu_affinity.h"
#include "common/error.h"
#include "executor/chrome_trace.h"
#include "executor/device_memory.h"
#include "executor/distribution.h"
#include "executor/drift.h"
#include "executor/launch_local.h"
#include "planner/profile/memory_meter.h"
#include "executor/pipeline.h"
#include "executor/planned_devices.h"
#include "executor/reference_training.h"
#include "executor/scoped_threads.h"
#include "executor/tensor_file.h"
#include "executor/verify.h"
#include "executor/wire.h"
#include "planner/graph/run_graph.h"
#include "planner/profile/timer.h"

namespace mp {
namespace {

constexpr int kDriftSamplesBefore = 5;  // and one after every step where it disturbs nothing (DriftProbe)

double ErrorPct(double measured, double predicted) { return predicted > 0 ? (measured / predicted - 1) * 100 : 0.0; }

double RelativeDiff(double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-30); }

bool HasBatchNorm(const CanonicalGraph& canonical) {
  return std::any_of(canonical.nodes.begin(), canonical.nodes.end(),
                     [](const torch::jit::Node* node) { return node->kind() == c10::aten::batch_norm; });
}

// Losses and final state of a reference trained on the same steps.
struct ReferenceResult {
  double max_loss_diff = 0;  // relative, over the steps
  StateComparison state;
  StateComparison gradients;  // the first step's, from the same state
};

ReferenceResult TrainReference(const Executor& exec, const std::vector<at::Tensor>& start,
                               const std::vector<c10::IValue>& inputs, const at::Tensor& labels,
                               const std::vector<double>& losses, bool microbatched,
                               const std::vector<at::Tensor>& first_gradients = {}) {
  ReferenceTrainer reference(exec.loaded(), start, exec.options().training, microbatched,
                             exec.options().pipeline.seed);
  ReferenceResult result;
  std::vector<at::Tensor> reference_gradients;
  for (double loss : losses) {
    double want = 0;
    try {
      want = reference.Step(inputs, labels);
      if (!first_gradients.empty() && reference_gradients.empty()) reference_gradients = GradientsOf(reference.State());
    } catch (const c10::Error& e) {
      throw InputError(Concat("--verify: the model run whole on one device cannot be trained (",
                              microbatched ? "same micro-batches" : "full batch", "): ", ErrorLine(e.what())));
    }
    const double diff = std::isnan(loss) || std::isnan(want) ? INFINITY : RelativeDiff(loss, want);
    result.max_loss_diff = std::max(result.max_loss_diff, diff);
  }
  std::vector<at::Tensor> got = exec.State(), want = reference.State();
  std::vector<std::string> names = exec.StateNames();
  if (!first_gradients.empty()) result.gradients = CompareState(first_gradients, reference_gradients, names, 1e-5);
  if (exec.plan().replicas > 1) {  // buffers are replica 0's, which saw only its share: parameters only
    const auto& params = exec.loaded().canonical.params;
    size_t kept = 0;
    for (size_t i = 0; i < params.size(); ++i) {
      if (!params[i].is_parameter) continue;
      got[kept] = got[i], want[kept] = want[i], names[kept] = names[i];
      ++kept;
    }
    got.resize(kept), want.resize(kept), names.resize(kept);
  }
  result.state = CompareState(got, want, names, 1e-5);
  return result;
}

// A figure that compares the run with the plan's prediction, or null where
// the plan predicts for other devices than the ones that ran it.
nlohmann::json Comparable(const PlannedDevices& planned, double value) {
  return planned.here ? nlohmann::json(value) : nlohmann::json(nullptr);
}

void CheckFlags(const ExecCommandRequest& request) {
  if (request.steps < 1) throw InputError(Concat("--steps must be at least 1, got ", request.steps));
  if (request.warmup < 0) throw InputError(Concat("--warmup must not be negative, got ", request.warmup));
  if (request.options.pipeline.threads_per_stage < 0) {
    throw InputError(Concat("--threads-per-stage must be at least 1, got ", request.options.pipeline.threads_per_stage));
  }
  if (request.timeout_s <= 0) throw InputError(Concat("--timeout must be at least 1 second, got ", request.timeout_s));
}

// The files mpexec would write: ones the mode keeps, never a file it reads,
// and no two the same.
void CheckOutputFiles(const ExecCommandRequest& request, bool training, const std::vector<std::string>& inputs_read) {
  if (training && !request.output.empty()) {
    throw InputError("--output: this is a training plan; its outputs are not kept (use --save for the trained model)");
  }
  if (!training && !request.save.empty()) throw InputError("--save: this is an inference plan; it trains nothing");
  if (!training && !request.labels.empty()) throw InputError("--labels: this is an inference plan; it takes no labels");
  if (!training && !request.training_flags.empty()) {
    throw InputError(request.training_flags.front() + ": this is an inference plan; it trains nothing");
  }
  const std::vector<std::pair<const char*, const std::string*>> outputs = {{"--output", &request.output},
                                                                            {"--save", &request.save},
                                                                            {"--save-optimizer", &request.save_optimizer},
                                                                            {"--trace", &request.trace}};
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].second->empty()) continue;
    CheckWritable(*outputs[i].second, inputs_read);
    for (size_t j = 0; j < i; ++j) {
      if (*outputs[j].second == *outputs[i].second || SameFile(*outputs[j].second, *outputs[i].second)) {
        throw InputError(Concat(outputs[i].first, " ", *outputs[i].second, ": the same file as ", outputs[j].first));
      }
    }
  }
}

// Each stage's busy time in the median step against the plan's, and its
// all-reduce (`allreduce_ms`, the middle mean over the steps).
nlohmann::json StagesJson(const Plan& plan, const PipelineRun& run, const std::vector<double>& allreduce_ms,
                          const std::vector<std::vector<double>>& allreduce_steps_ms, double predicted,
                          const PlannedDevices& planned) {
  nlohmann::json stages = nlohmann::json::array();
  for (size_t s = 0; s < run.busy_ms.size(); ++s) {
    const double predicted_busy = plan.stages[s].busy_fraction * predicted;
    stages.push_back({{"id", s},
                      {"busy_ms", run.busy_ms[s]},
                      {"idle_ms", std::max(0.0, run.step_ms - run.busy_ms[s])},
                      {"predicted_busy_ms", predicted_busy},
                      {"busy_error_pct", Comparable(planned, ErrorPct(run.busy_ms[s], predicted_busy))},
                      {"predicted_busy_fraction", plan.stages[s].busy_fraction},
                      {"predicted_peak_memory_bytes", plan.stages[s].peak_memory_bytes}});
    if (plan.replicas > 1 && plan.training) {
      stages.back()["allreduce_ms"] = s < allreduce_ms.size() ? allreduce_ms[s] : 0.0;
      stages.back()["allreduce_steps_ms"] =
          s < allreduce_steps_ms.size() ? allreduce_steps_ms[s] : std::vector<double>();
      stages.back()["predicted_allreduce_ms"] = plan.stages[s].allreduce_ms;
    }
  }
  return stages;
}

// The middle value (of an even count, the upper of the two middle ones).
double UpperMedian(std::vector<double> values) {
  std::nth_element(values.begin(), values.begin() + std::ptrdiff_t(values.size() / 2), values.end());
  return values[values.size() / 2];
}

// Per entry of `member` (as many as the median run has), its value in
// each of `runs`, in order; a run without that entry counts 0.
std::vector<std::vector<double>> Each(const std::vector<PipelineRun>& runs, const PipelineRun& median,
                                      std::vector<double> PipelineRun::*member) {
  std::vector<std::vector<double>> each((median.*member).size());
  for (size_t i = 0; i < each.size(); ++i) {
    for (const PipelineRun& run : runs) each[i].push_back(i < (run.*member).size() ? (run.*member)[i] : 0.0);
  }
  return each;
}

// Per entry of `member`, `statistic` of it over `runs` (Each).
std::vector<double> Over(const std::vector<PipelineRun>& runs, const PipelineRun& median,
                         std::vector<double> PipelineRun::*member, double (*statistic)(std::vector<double>)) {
  std::vector<double> figures;
  for (std::vector<double>& each : Each(runs, median, member)) figures.push_back(statistic(std::move(each)));
  return figures;
}

// The steps of a run: the warm-up ones train too, so they have losses.
struct TimedSteps {
  double first_step_ms = 0;         // the cold one
  std::vector<PipelineRun> runs;    // the timed steps, in order
  std::vector<double> steps_ms;     // their times
  std::vector<double> losses;       // every step's, warm-up included
  std::vector<double> grad_norms;   // likewise: the gradients' norm before clipping (--clip-grad-norm)
  size_t median = 0;                // into runs: the median step by wall time
  // Per stage: its all-reduce over the timed steps, the mean of their
  // middle 80% (MiddleMean), as the profiler's probes time it: what a step
  // pays on average. The median step's own was noisy (the ConvNet's small
  // sum read 0.6 to 6.1 ms over 20 steps), and so was the median over the
  // steps: most of that sum's steps took 0.5-1 ms and the rest 3-6, and a
  // run's median read 0.6 to 2.2 where the middle mean of 50 steps was 1.5.
  std::vector<double> allreduce_ms;
  std::vector<std::vector<double>> allreduce_steps_ms;  // per stage, each timed step's, in order
  double optimizer_ms = 0;          // the median over the timed steps (this rank's)
  std::vector<double> device_optimizer_ms;  // per program, likewise; -1 where another rank's
  int64_t peak_heap_bytes = -1;     // of the steps that sampled it (RunExecCommand)
  std::vector<int64_t> device_step_peak_bytes;  // per device, likewise (PipelineRun's)

  const PipelineRun& Median() const { return runs[median]; }
};

TimedSteps Summarise(std::vector<PipelineRun> all, int warmup) {
  TimedSteps t;
  t.first_step_ms = all.front().step_ms;
  for (size_t i = 0; i < all.size(); ++i) {
    t.losses.push_back(all[i].loss);
    t.grad_norms.push_back(all[i].grad_norm);
    t.peak_heap_bytes = std::max(t.peak_heap_bytes, all[i].peak_heap_bytes);
    const std::vector<int64_t>& peaks = all[i].device_step_peak_bytes;
    t.device_step_peak_bytes.resize(std::max(t.device_step_peak_bytes.size(), peaks.size()), -1);
    for (size_t d = 0; d < peaks.size(); ++d) {
      t.device_step_peak_bytes[d] = std::max(t.device_step_peak_bytes[d], peaks[d]);
    }
    if (int(i) < warmup) continue;
    t.steps_ms.push_back(all[i].step_ms);
    t.runs.push_back(std::move(all[i]));
  }
  std::vector<size_t> order(t.runs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return t.runs[a].step_ms < t.runs[b].step_ms; });
  t.median = order[order.size() / 2];
  std::vector<double> optimizer;
  for (const PipelineRun& run : t.runs) optimizer.push_back(run.optimizer_ms);
  t.optimizer_ms = UpperMedian(std::move(optimizer));
  t.device_optimizer_ms = Over(t.runs, t.Median(), &PipelineRun::device_optimizer_ms, UpperMedian);
  t.allreduce_steps_ms = Each(t.runs, t.Median(), &PipelineRun::allreduce_ms);
  for (const std::vector<double>& each : t.allreduce_steps_ms) t.allreduce_ms.push_back(MiddleMean(each));
  return t;
}

// Training on output 0 where the model also returns a floating-point
// scalar: most likely its own loss (nanoGPT's `logits, loss`), which
// --loss output would train on; mse on the logits trains another model.
// With --loss output, a loss that is neither a mean nor a sum over its
// samples: how it was taken.
std::string LossNote(const OutputLayout& layout, LossKind loss) {
  if (loss == LossKind::kOutput) {
    if (OwnLossReduction(layout, loss) != LossReduction::kUnknown) return "";
    return Concat("--loss output: the model's loss changed ", layout.doubled.at(LossTensor(layout, loss)),
                  "x when its samples came twice, neither a mean (1x) nor a sum (2x) over them; taken as a mean, "
                  "each micro-batch's times its share of the batch (--verify's full-batch line shows whether "
                  "that adds up to the batch's)");
  }
  const std::optional<size_t> t = layout.ScalarLoss();
  if (!t) return "";
  return Concat(layout.Name(*t), " is a floating-point scalar: if it is the model's own loss, --loss output trains on it "
                "(this run: ", LossName(loss), " on output 0)");
}

// What the figures are for: other devices' predictions, the machine's
// drift, and in training the losses and optimizer.
void AddContext(nlohmann::json& out, const ExecCommandRequest& request, const Plan& plan, const OutputLayout& layout,
                const PlannedDevices& planned, const Drift& drift, const OptimizerSettings& optimizer,
                const TimedSteps& timed) {
  if (!planned.here) {
    out["predicted_for"] = planned.what;
    out["predicted_from"] = planned.estimate;
  }
  if (drift.measured) {
    out["drift"] = {{"reference_ms", drift.now_ms},
                    {"profiled_reference_ms", plan.profile.reference_ms},
                    {"factor", drift.factor},
                    {"samples", drift.samples},
                    {"rescaled", request.rescale}};
    if (!drift.worker_factors.empty()) {
      out["drift"]["worker_factors"] = drift.worker_factors;
      nlohmann::json cpus = nlohmann::json::array();
      for (const auto& block : drift.worker_cpus) cpus.push_back(CpuList(block));
      out["drift"]["worker_cpus"] = cpus;
    }
  }
  // Whether the CPU workers ran pinned to their blocks of cores
  // (MP_PIN_CPUS=1, common/cpu_affinity.h).
  out["workers_pinned"] = !WorkerCpus(0, PlanWorkers(plan), ThreadsPerStage(plan, request.options.pipeline)).empty();
  if (plan.training) {
    out["loss"] = timed.losses.back();
    out["losses"] = timed.losses;
    out["loss_function"] = LossName(request.options.training.loss);
    if (request.options.training.loss == LossKind::kOutput) {
      out["loss_reduction"] = ReductionName(OwnLossReduction(layout, request.options.training.loss));
    }
    const bool adam = optimizer.kind != OptimizerKind::kSgd;
    out["optimizer_ms"] = timed.optimizer_ms;
    out["device_optimizer_ms"] = timed.device_optimizer_ms;
    out["predicted_optimizer_ms"] = plan.predicted.optimizer_ms;
    out["planned_optimizer"] = plan.optimizer;
    out["optimizer"] = {{"name", optimizer.Name()},
                        {"described", optimizer.Describe()},
                        {"lr", optimizer.lr},
                        {"weight_decay", optimizer.weight_decay}};
    if (adam) {
      out["optimizer"]["betas"] = {optimizer.beta1, optimizer.beta2};
      out["optimizer"]["eps"] = optimizer.eps;
    } else {
      out["optimizer"]["momentum"] = optimizer.momentum;
    }
    if (optimizer.clip_grad_norm > 0) {
      out["optimizer"]["clip_grad_norm"] = optimizer.clip_grad_norm;
      out["grad_norms"] = timed.grad_norms;
    }
    if (std::string note = LossNote(layout, request.options.training.loss); !note.empty()) out["loss_note"] = note;
  }
}

struct Verdict {
  bool ok = false;
  nlohmann::json detail;
};

// The last step's outputs, bit for bit against the same micro-batches run
// without pipelining; the full batch in one go is only reported (its float
// sums differ). Each from `before`, the state that step started from: a
// forward that writes its buffers (spectral_norm's power iteration) wrote
// them at every step, and the reference ran from the state after them (the
// median step's outputs against it, until 2026-12-07). The model keeps the
// state the steps left.
Verdict VerifyInference(const LoadedPlan& loaded, const std::vector<at::Tensor>& before,
                        const std::vector<c10::IValue>& inputs, const PipelineRun& run, uint64_t seed) {
  const std::vector<at::Tensor> after = CloneState(loaded.canonical);
  AssignState(loaded.canonical, before);
  const Verification v = Verify(run.outputs, RunWholeMicrobatches(loaded, inputs, seed, run.step));
  AssignState(loaded.canonical, before);
  const Verification full = Verify(run.outputs, RunWhole(loaded.canonical, inputs), 1e-4, 1e-5);
  AssignState(loaded.canonical, after);
  return {v.ok,
          {{"max_abs_diff", v.max_abs_diff},
           {"tensors", v.tensors},
           {"full_batch_max_abs_diff", full.max_abs_diff},
           {"full_batch_close", full.ok}}};
}

// Within 1e-5 of the same micro-batches trained on one device; the full
// batch in one go is reported beside it.
// Losses every step, and the state at the end under SGD, whose step is in
// proportion to the gradient; under Adam(W) the first step's gradients
// instead (from one state in both), the state reported only: Adam steps
// each element by its gradient over that gradient's own size, so where
// pipelining changes a float sum (a tied weight's two stages, replicas) an
// element whose gradient is small or rounding (attention's key bias)
// steps by up to lr either way (docs/executor.md).
Verdict VerifyTraining(const Executor& exec, const std::vector<at::Tensor>& start,
                       const std::vector<c10::IValue>& inputs, const at::Tensor& labels,
                       const std::vector<double>& losses, const std::vector<at::Tensor>& first_gradients) {
  const LoadedPlan& loaded = exec.loaded();
  const Plan& plan = loaded.plan;
  const ReferenceResult same = TrainReference(exec, start, inputs, labels, losses, true, first_gradients);
  const ReferenceResult full = TrainReference(exec, start, inputs, labels, losses, false);  // reported: no gradients
  const bool adam = exec.optimizer().settings().kind != OptimizerKind::kSgd;
  nlohmann::json detail = {{"rtol", 1e-5},
                           {"steps", losses.size()},
                           {"max_loss_relative_diff", same.max_loss_diff},
                           {"max_state_relative_diff", same.state.max_relative_diff},
                           {"worst_tensor", same.state.worst},
                           {"max_gradient_relative_diff", same.gradients.max_relative_diff},
                           {"worst_gradient", same.gradients.worst},
                           {"judged_on", adam ? "gradients" : "state"},
                           {"tensors", same.state.tensors},
                           {"full_batch_max_loss_relative_diff", full.max_loss_diff},
                           {"full_batch_max_state_relative_diff", full.state.max_relative_diff},
                           {"full_batch_worst_tensor", full.state.worst}};
  if (HasBatchNorm(loaded.canonical) && plan.microbatches * plan.replicas > 1) {
    detail["note"] =
        "BatchNorm normalises each micro-batch with its own statistics, so the full batch in one go trains "
        "differently; expected";
  }
  if (loaded.canonical.random_ops > 0 && plan.microbatches * plan.replicas > 1) {
    detail["random_note"] = Concat("the model's ", loaded.canonical.random_ops,
                                   " random op(s) draw per micro-batch, so the full batch in one go draws other "
                                   "numbers (dropout masks); expected");
  }
  if (HasBatchNorm(loaded.canonical) && plan.replicas > 1) {
    detail["buffers_note"] = Concat("the BatchNorm running statistics kept are replica 0's, which saw 1/",
                                    plan.replicas, " of the batch (as DDP keeps rank 0's): parameters compared only");
  }
  if (adam) {
    detail["state_note"] = Concat(exec.optimizer().settings().Name(), " steps each element by its gradient over that "
                                  "gradient's size, so a float sum pipelining changes moves small gradients' elements "
                                  "by up to lr: judged on the first step's gradients, the state reported only");
  }
  return {same.max_loss_diff <= 1e-5 && (adam ? same.gradients.ok : same.state.ok), detail};
}

}  // namespace

nlohmann::json RunExecCommand(const ExecCommandRequest& request) {
  CheckFlags(request);
  MemoryMeter::Install();  // each worker's tensors counted (device_memory.h)
  // This thread's work on one intra-op thread from the start, as the
  // pipeline runs it (RunOnOwnThread, scoped_threads.h): LibTorch's
  // default on a machine of many cores would leave a team behind.
  UseThreads(1);
  const std::optional<RankEnv> rank_env = RankEnvFromEnvironment();
  Distribution dist;
  ExecutorOptions options = request.options;
  if (rank_env) options.pipeline.distribution = &dist;
  Executor exec(request.plan, options);
  const Plan& plan = exec.plan();
  const PlannedDevices planned = PlannedFor(plan);
  if (!planned.here && !request.cpu_workers) throw InputError(NotHereMessage(request.plan, planned, plan));
  const LoadedPlan& loaded = exec.loaded();
  const bool training = plan.training;
  const std::vector<std::string> inputs_read = {request.plan,  loaded.model_path, loaded.planned_model_path,
                                                request.input, request.labels,     request.load_optimizer};
  CheckOutputFiles(request, training, inputs_read);
  const std::vector<c10::IValue> inputs =
      request.input.empty() ? exec.SyntheticInputs() : LoadInputs(request.input, plan.inputs);
  at::Tensor labels;
  if (training) {
    labels = request.labels.empty() ? exec.SyntheticLabels() : LoadTensor(request.labels, "--labels");
    exec.CheckLabels(labels, "--labels " + request.labels);
  }
  const std::vector<at::Tensor> start = request.verify && training ? exec.State() : std::vector<at::Tensor>{};
  // Stages over processes: every rank got here with the same checks done;
  // this rank runs its own stages and rank 0 gathers the rest afterwards.
  std::unique_ptr<ProcessGroup> group;
  std::vector<std::unique_ptr<ProcessGroup>> stage_groups;
  if (rank_env) {
    std::vector<int> stage_program;
    for (const PlanStage& stage : plan.stages) stage_program.push_back(stage.program);
    // Ranks mpexec --launch-local started say so; torchrun's, their variable.
    const std::string world_given =
        Concat(LauncherFolder() ? "--launch-local " : "WORLD_SIZE=", rank_env->world_size);
    dist = Distribute(stage_program, plan.replicas, rank_env->rank, rank_env->world_size, world_given);
    group = std::make_unique<ProcessGroup>(*rank_env, std::chrono::milliseconds(int64_t(request.timeout_s) * 1000));
    dist.group = group.get();
    dist.streams = std::make_shared<WireStreams>(*group);
    if (training) stage_groups = MakeStageGroups(dist);  // inference all-reduces nothing
  }
  // Every rank reads the whole file (so all refuse a bad one alike) and
  // keeps the state of the parameters it steps.
  if (!request.load_optimizer.empty()) exec.LoadOptimizerState(request.load_optimizer);

  // Over processes rank 0 reports, so it alone samples the reference, the
  // others waiting for it: its samples are pinned to each worker's cores in
  // turn, another rank's among them, and a rank stepping there meanwhile
  // would slow both. Between the steps nobody samples on CPU (DriftProbe).
  DriftProbe probe(plan, ThreadsPerStage(plan, request.options.pipeline), group != nullptr);
  if (!group || group->rank() == 0) probe.Sample(kDriftSamplesBefore);
  if (group) {
    at::Tensor all_sampled = at::zeros({1});
    group->AllReduceSum(all_sampled);
  }
  const int64_t heap_before = HeapBytesInUse();
  std::vector<PipelineRun> all;
  std::vector<at::Tensor> first_gradients;
  std::vector<at::Tensor> last_start;  // inference: the state the step --verify checks started from
  for (int i = 0; i < request.warmup + request.steps; ++i) {
    // The heap's peak is sampled in the last warm-up step (the heap has its
    // working size by then), not in the timed ones: the sampler costs the
    // stages time. With no warm-up, the timed steps sample it.
    exec.SampleHeap(request.warmup == 0 || i == request.warmup - 1);
    if (!training && request.verify && i + 1 == request.warmup + request.steps) last_start = exec.State();
    all.push_back(training ? exec.TrainStep(inputs, labels) : exec.Infer(inputs));
    if (training && request.verify && i == 0) first_gradients = exec.Gradients();  // --verify compares them
    probe.AfterStep();
  }
  const Drift drift = probe.Result();
  if (group) {
    GatherRuns(*group, dist, all);
    if (training && (request.verify || !request.save.empty() || !request.save_optimizer.empty())) {
      GatherState(*group, dist, loaded, request.save_optimizer.empty() ? nullptr : &exec.optimizer(),
                  request.verify ? &first_gradients : nullptr);
    }
    if (group->rank() != 0) return nullptr;  // rank 0 reports for every rank
  }
  const TimedSteps timed = Summarise(std::move(all), request.warmup);
  const std::vector<double>& losses = timed.losses;
  const PipelineRun& run = timed.Median();
  const double median = run.step_ms;
  // --rescale: the plan's figures at the machine's speed now. Not by
  // default: on this machine the reference read up to 1.7x slower in runs
  // whose steps were not (docs/executor.md).
  const double scale = request.rescale ? drift.factor : 1.0;
  const double predicted = plan.predicted.step_ms * scale;
  const double low = plan.predicted.step_low_ms * scale, high = plan.predicted.step_high_ms * scale;

  int64_t predicted_peak = 0;
  for (const PlanStage& stage : plan.stages) predicted_peak += stage.peak_memory_bytes;
  const std::vector<DeviceMemory> device_memory =
      CompareDeviceMemory(loaded, timed.device_step_peak_bytes, training ? &exec.optimizer() : nullptr);
  nlohmann::json out = {{"plan", request.plan},
                        {"model", loaded.model_path},
                        {"model_given", !request.options.model.empty()},
                        {"mode", training ? "train" : "infer"},
                        {"stages",
                         StagesJson(plan, run, timed.allreduce_ms, timed.allreduce_steps_ms, predicted, planned)},
                        {"microbatches", plan.microbatches},
                        {"microbatch_size", plan.microbatch_size},
                        {"batch", plan.batch},
                        {"schedule", ScheduleName(plan.schedule)},
                        {"threads_per_stage", ThreadsPerStage(plan, request.options.pipeline)},
                        {"profile_threads", plan.profile.threads},
                        {"replicas", plan.replicas},
                        {"ranks", group ? group->size() : 1},
                        {"stage_ranks", group ? dist.owner : std::vector<int>(plan.stages.size(), 0)},
                        // the cores this process (rank 0) may run on: with MP_PIN_CPUS=1 its share (RankCpus)
                        {"process_cpus", CpuList(AllowedCpus())},
                        {"transport", group ? "c10d gloo" : "in-process channels"},
                        {"steps", request.steps},
                        {"warmup", request.warmup},
                        {"seed", request.options.pipeline.seed},
                        {"step_ms", median},
                        {"steps_ms", timed.steps_ms},
                        {"first_step_ms", timed.first_step_ms},
                        {"predicted_step_ms", predicted},
                        {"planned_step_ms", plan.predicted.step_ms},
                        {"step_error_pct", Comparable(planned, ErrorPct(median, predicted))},
                        {"measured_vs_predicted", Comparable(planned, predicted > 0 ? median / predicted : 0.0)},
                        {"samples_per_s", median > 0 ? double(plan.batch) * 1000.0 / median : 0.0},
                        {"predicted_samples_per_s", plan.predicted.samples_per_s},
                        // CPU workers share one device: the process's heap.
                        {"memory",
                         {{"device", "cpu"},
                          {"allocator", HeapAllocatorName()},
                          {"peak_bytes", timed.peak_heap_bytes},
                          {"before_steps_bytes", heap_before},
                          {"peak_resident_bytes", PeakResidentBytes()},
                          {"predicted_peak_bytes", predicted_peak},
                          {"devices", DeviceMemoryJson(device_memory)}}}};
  const OptimizerSettings& optimizer = exec.optimizer().settings();
  const int kept_states = OptimizerStateTensors(optimizer.Name());
  if (training && plan.optimizer_state_factor != kept_states) {
    out["memory"]["optimizer_note"] =
        Concat("the plan's memory holds ", plan.optimizer_state_factor, " optimizer tensor(s) per parameter (mpplan "
               "--optimizer", plan.optimizer.empty() ? "" : " " + plan.optimizer, "); this run's ", optimizer.Name(),
               " keeps ", kept_states);
  }
  if (high > 0) {
    out["predicted_band_ms"] = {low, high};
    out["in_band"] = low <= median && median <= high;
  }
  AddContext(out, request, plan, loaded.output_layout, planned, drift, optimizer, timed);

  if (request.verify) {
    // The references at a stage's thread count, on a thread that takes its
    // OpenMP team with it (RunOnOwnThread): this one keeps one thread.
    Verdict verdict;
    RunOnOwnThread(ThreadsPerStage(plan, request.options.pipeline), [&] {
      const uint64_t seed = request.options.pipeline.seed;
      verdict = training ? VerifyTraining(exec, start, inputs, labels, losses, first_gradients)
                         : VerifyInference(loaded, last_start, inputs, timed.runs.back(), seed);
    });
    out["verify"] = verdict.ok;
    out["verify_detail"] = verdict.detail;
  }

  const std::vector<std::string> protect = inputs_read;
  if (!request.output.empty()) SaveOutputs(request.output, run.outputs, protect);
  if (!request.save.empty()) exec.SaveModel(request.save, protect);
  if (!request.save_optimizer.empty()) exec.SaveOptimizerState(request.save_optimizer, protect);
  if (!request.trace.empty()) WriteFileAtomically(request.trace, ChromeTrace(plan, run), protect);
  return out;
}

}  // namespace mp
