// RunPlanCommand: ProfileModel -> MakePlanDevices -> SearchAtMeasuredSizes -> BuildPlan
// -> ComparePartitioners, then the outputs. The plan text is parsed back and
// checked against the graph before anything is written, so a plan mpplan
// writes is always one mpexec accepts.
#include "planner/command/plan_command.h"

#include <chrono>
#include <filesystem>
#include <string>

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/sanitizer_build.h"
#include "common/sha256.h"
#include "executor/link_probe.h"
#include "executor/process_group.h"
#include "planner/command/plan_devices.h"
#include "planner/command/previous_plan.h"
#include "planner/command/search_measured.h"
#include "planner/command/search_replicas.h"
#include "planner/graph/model_file.h"
#include "planner/partition/baselines.h"
#include "planner/partition/order.h"
#include "planner/plan/plan_reader.h"
#include "planner/plan/plan_writer.h"
#include "planner/plan_build/comparisons.h"
#include "planner/plan_build/plan_build.h"
#include "planner/profile/timer.h"
#include "planner/report/gantt_svg.h"
#include "planner/report/graph_dot.h"
#include "planner/report/report_markdown.h"

namespace mp {
namespace {

namespace fs = std::filesystem;

// Processes of one machine all-reduce over Gloo on TCP loopback: where the
// link probe could not run (a profile read without it, a build without
// Gloo), a per-hop latency and bandwidth from bench_distributed's replica
// runs on a 2-core machine (docs/BENCHMARKS.md, eleventh session), good
// enough to weigh replicas against stages, not a measurement of the
// machine at hand.
constexpr Link kLoopback{1e9, 0.1};

// A probed link as the planner's (Link's fields come the other way round).
Link AsLink(const Profile::ProbedLink& probed) { return Link{probed.bytes_per_s, probed.latency_ms}; }

// The probed all-reduce hop, slowed (or sped) as the model's own sum after
// a step ran against it: a ring of two over it then charges the model's
// gradients what that sum measured.
Link AfterStep(const Profile& profile) {
  const double factor = AllReduceAfterStepFactor(profile);
  Link link = AsLink(profile.allreduce_link);
  link.latency_ms *= factor;
  if (link.bandwidth_bytes_per_s > 0) link.bandwidth_bytes_per_s /= factor;
  return link;
}

// The model's path as the plan records it: relative to the plan's directory.
std::string ModelPathFromPlan(const std::string& model, const std::string& plan) {
  const fs::path model_abs = fs::absolute(model).lexically_normal();
  const fs::path plan_dir = fs::absolute(plan).lexically_normal().parent_path();
  const fs::path relative = model_abs.lexically_relative(plan_dir);
  return relative.empty() ? model_abs.string() : relative.string();
}

std::string SvgPathFor(const std::string& report) {
  fs::path svg(report);
  svg.replace_extension(".svg");
  return svg.string();
}

// Before any work: no output may be an input or another output, and every
// output's directory must exist, so a typo fails in a second, not after the
// profile, and never with half of the outputs written.
void CheckOutputs(const std::vector<std::string>& outputs, const std::vector<std::string>& inputs) {
  std::vector<fs::path> seen;
  for (const std::string& out : outputs) {
    if (out.empty()) continue;
    CheckWritable(out, inputs);
    const fs::path path = fs::absolute(out).lexically_normal();
    for (const fs::path& other : seen) {
      if (other == path || SameFile(other.string(), path.string())) throw InputError(Concat(out, ": given as two different outputs"));
    }
    seen.push_back(path);
  }
}

// Whether the search may choose replicas: --replicas above 1, or auto with
// room for two copies of the pipeline, no hand split by layers, and a build
// whose mpexec can run them (over processes).
bool MayReplicate(const PlanCommandRequest& request) {
  if (request.replicas != 0) return request.replicas > 1;
  return ProcessGroupsAvailable() && request.partitioner != "layers" && request.gpus / std::max(1, request.stages) >= 2;
}

// Inference joins each output's micro-batches, and replicas' outputs,
// along the dimension that grows with the batch (executor/
// microbatches.h); an output none of whose dimensions does (a scalar, a
// mean over the batch) cannot be joined, so such a model runs its batch in
// one micro-batch on one copy of the pipeline. Returns the warning that
// says so ("" where every output joins); throws InputError where the
// request asks for more micro-batches or replicas.
std::string OnePiece(const OutputLayout& outputs, const PlanCommandRequest& request) {
  const std::optional<size_t> t = outputs.FirstUnjoinable();
  if (!t) return "";
  const std::string why =
      Concat(outputs.Name(*t), " does not grow with the batch, so its micro-batches and replicas cannot be joined");
  if (request.microbatches > 1) {
    throw InputError(Concat("--microbatches ", request.microbatches, ": ", why,
                            "; this model's inference runs 1 micro-batch"));
  }
  if (request.replicas > 1) {
    throw InputError(Concat("--replicas ", request.replicas, ": ", why, "; this model's inference runs 1 replica"));
  }
  return Concat(why, ": planned with 1 micro-batch and no replicas");
}

// A parameter or buffer that several of forward's nodes read and update
// in place (OpGraph::shared_state) must see each micro-batch's update
// before the next micro-batch reads it, as on one device. Across stages a
// later micro-batch's first stage reads it before an earlier one's last
// stage has updated it, and each replica updates its own copy from its
// share of the batch: both trained other weights than one device (a hand
// kept running mean, by 0.164 in the loss after 3 steps at 2 stages), and
// a chain of in-place updates cut in two was refused by mpexec. So such a
// model is planned on 1 stage and no replicas. Returns the warning that
// says so ("" where nothing is shared); throws InputError where the
// request asks for more stages, replicas or a split by layers.
std::string OneStage(const OpGraph& graph, const PlanCommandRequest& request) {
  if (graph.shared_state.empty()) return "";
  const SharedState& state = graph.shared_state.front();
  std::string nodes;
  for (size_t i = 0; i < state.nodes.size() && i < 4; ++i) nodes += (i ? ", " : "") + std::to_string(state.nodes[i]);
  if (state.nodes.size() > 4) nodes += ", ...";
  const std::string why = Concat("forward updates '", graph.values.at(state.value).name, "' in place and ",
                                 state.nodes.size(), " of its ops read or write it (nodes ", nodes,
                                 "), so every micro-batch must see the update of the one before");
  if (request.stages > 1) throw InputError(Concat("--stages ", request.stages, ": ", why, "; it runs on 1 stage"));
  if (request.schedule && ChunksFor(*request.schedule, request.chunks) > 1) {
    const std::string name = ScheduleName(*request.schedule);
    throw InputError(Concat("--schedule ", name, ": ", why, "; it runs on 1 device, and ", name,
                            " needs at least 2"));
  }
  if (request.replicas > 1) {
    throw InputError(Concat("--replicas ", request.replicas, ": ", why, "; it runs without replicas"));
  }
  if (!request.split.empty()) throw InputError(Concat("--split: ", why, "; it runs on 1 stage"));
  return Concat(why, ": planned on 1 stage and no replicas");
}

// Inference whose graph still drops out: a graph traced in training mode
// (torch.jit.trace without model.eval(), as one traces to train) holds its
// dropout with train=True, and such an inference plan's outputs are random
// from run to run (mpexec --verify replays the draws, and passes). A
// scripted model's dropout reads `self.training`, false in inference, and
// draws nothing (SeedRandomOps leaves it as aten::dropout). Returns the
// warning ("" where none draws): Monte Carlo dropout is drawn on purpose.
std::string InferenceDropout(const OpGraph& graph) {
  // SeedRandomOps' twins of the dropouts that draw (in-place ones too), and
  // of LibTorch 2.x's attention where its dropout_p is not a constant 0.
  const auto draws = [](const std::string& kind) {
    return kind.rfind("mp::", 0) == 0 &&
           (kind.find("dropout") != std::string::npos || kind == "mp::scaled_dot_product_attention");
  };
  const OpNode* first = nullptr;
  int count = 0;
  for (const OpNode& node : graph.nodes) {
    if (!draws(node.kind)) continue;
    if (!first) first = &node;
    ++count;
  }
  if (!first) return "";
  return Concat("inference draws dropout: ", count, " dropout op", count == 1 ? "" : "s", " (node ", first->id, ", ",
                first->kind, first->layer.empty() ? "" : " in layer " + first->layer,
                ") run as in training, as a graph traced in training mode holds them: its outputs change from run to "
                "run; trace the model after model.eval() for inference");
}

}  // namespace

std::string DefaultPlanPath(const std::string& model_path) {
  fs::path path(model_path);
  if (path.extension() == ".pt" || path.extension() == ".pth") path.replace_extension();
  return path.string() + ".plan.yaml";
}

PlanCommandResult RunPlanCommand(const PlanCommandRequest& request) {
  PlanCommandResult result;
  result.plan_path = request.output.empty() ? DefaultPlanPath(request.profile.model_path) : request.output;
  if (!request.report.empty()) result.svg_path = SvgPathFor(request.report);
  std::vector<std::string> inputs = {request.profile.model_path, request.profile.profile_in,
                                     request.profile.device_profile};
  const std::optional<PreviousPlan> previous = ReadPreviousPlan(request.previous, result.plan_path);
  if (previous && previous->named && !SameFile(previous->path, result.plan_path)) inputs.push_back(previous->path);
  CheckOutputs({result.plan_path, request.report, result.svg_path, request.dot, request.profile.profile_out},
               inputs);
  CheckGpus(request.gpus);
  if (request.replicas < 0 || request.replicas > request.gpus) {
    throw InputError(Concat("--replicas ", request.replicas, ": expected auto or 1 to --gpus (", request.gpus, ")"));
  }
  // Devices each copy of the pipeline gets (auto: at most all of them); as
  // the search takes R replicas of --gpus / R devices (rounded down), so
  // may the user: --gpus 3 --replicas 2 uses 2 of the 3.
  const int per_replica = request.gpus / std::max(1, request.replicas);
  if (request.stages < 0 || request.stages > per_replica) {
    throw InputError(request.replicas > 1 ? Concat("--stages ", request.stages, ": expected auto or 1 to --gpus / --replicas (",
                                                   per_replica, ")")
                                          : Concat("--stages ", request.stages, ": expected auto or 1 to --gpus (",
                                                   request.gpus, ")"));
  }
  // Refused before profiling: what no search could plan.
  // With auto, --chunks is what the search's interleaved-1f1b plans take.
  if (request.chunks > 0 && request.schedule && *request.schedule != ScheduleKind::kInterleaved1F1B) {
    throw InputError(Concat("--chunks: only --schedule interleaved-1f1b (or auto, for its interleaved plans) takes a "
                            "number of stages per device (", ScheduleName(*request.schedule), " runs ",
                            ChunksFor(*request.schedule, 0), " on each)"));
  }
  if (request.chunks > 0 && !request.profile.training) {
    throw InputError("--chunks: --mode infer runs forward only, one stage a device");
  }
  if (request.chunks > 0 && request.partitioner == "layers") {
    throw InputError("--chunks: a layer split (--partitioner layers) cuts one stage a device");
  }
  if (request.schedule && *request.schedule != ScheduleKind::kForwardOnly &&
      *request.schedule != ScheduleKind::kGPipe && *request.schedule != ScheduleKind::kOneFOneB) {
    const ScheduleKind kind = *request.schedule;
    const std::string flag = "--schedule " + ScheduleName(kind);
    if (!request.profile.training) throw InputError(flag + ": a training schedule; --mode infer runs forward only");
    const int chunks = ChunksFor(kind, request.chunks);
    // Several stages a device need 2 devices or more: said against the
    // flag that leaves one (the search's reason named a shape the user
    // never asked for: "with 2 stages: zbv needs at least 2 devices").
    const int pipeline = request.stages > 0 ? request.stages : per_replica;
    if (chunks > 1 && pipeline < 2) {
      const std::string given = request.stages > 0   ? Concat("--stages ", request.stages)
                                : request.replicas > 1 ? Concat("--gpus ", request.gpus, " over --replicas ",
                                                                request.replicas)
                                                       : Concat("--gpus ", request.gpus);
      throw InputError(Concat(flag, ": ", ScheduleName(kind), " needs at least 2 devices a pipeline (", chunks,
                              " stages on each); ", given, " leaves 1"));
    }
    if (request.microbatches > 0 && request.stages > 0) {
      if (std::string why = ScheduleRuledOut(kind, request.stages, request.microbatches, chunks); !why.empty()) {
        throw InputError(flag + ": " + why);
      }
    }
  }
  if (request.recompute == Recompute::kAlways) {
    if (!request.profile.training) throw InputError("--recompute always: inference keeps no activations to recompute");
    if (request.schedule && SplitsBackward(*request.schedule)) {
      throw InputError(Concat("--recompute always with --schedule ", ScheduleName(*request.schedule),
                              ": it keeps each micro-batch's graph from I to W; recomputation is planned with gpipe, "
                              "1f1b and interleaved-1f1b"));
    }
  }
  if (request.processes && !request.profile.device_profile.empty()) {
    throw InputError("--processes: for CPU workers on this machine; a device profile's links are its own");
  }
  if (request.processes && !ProcessGroupsAvailable()) {
    throw InputError("--processes: this build has no Gloo, so mpexec runs every stage in one process");
  }
  if (request.partitioner == "layers" && request.split.empty()) {
    throw InputError("--partitioner layers needs --split 'layer1,layer2|layer3,layer4,fc'");
  }
  PlanDevices devices = MakePlanDevices(request.gpus, request.profile.device_profile, request.profile.device,
                                        request.memory_bytes, request.memory_headroom);
  // Hashed before it is loaded: the plan names the bytes that were profiled.
  CheckModelFile(request.profile.model_path);
  const std::string model_sha256 = Sha256File(request.profile.model_path);

  ProfileRequest profile_request = request.profile;
  profile_request.stages = request.gpus;
  const bool cpu_here = request.profile.device_profile.empty() && devices.devices.front().type == "cpu";
  // Charged with --processes (messages), and where the plan may have
  // replicas (which run over processes): the all-reduce in training, the
  // messages between a copy's stages.
  const bool links_charged = request.processes || MayReplicate(request);
  // Replicas run as processes: the contention probe times its copies so
  // too. Not under ThreadSanitizer, where a forked child may not start
  // threads (common/forked_child.h).
  profile_request.replica_processes = cpu_here && MayReplicate(request) && !kUnderThreadSanitizer;
  if (cpu_here && links_charged && ProcessGroupsAvailable()) {
    profile_request.measure_links = [](Profile& profile) {
      const ProbedLinks links = ProbeProcessLinks();
      profile.process_link = {links.message.latency_ms, links.message.bytes_per_s};
      profile.allreduce_link = {links.allreduce.latency_ms, links.allreduce.bytes_per_s};
    };
    profile_request.measure_allreduce = [](const RankStep& step, int warmup, int timed) {
      const StepAllReduce sum = ProbeAllReduceAfterStep(step, warmup, timed);
      Profile::AllReduceAfterStep measured;
      measured.bytes = sum.bytes;
      measured.ms = sum.ms;
      measured.gap_ms = sum.gap_ms;
      measured.round_ms = sum.round_ms;
      return measured;
    };
  }
  profile_request.check_outputs = [&request](const OutputLayout& outputs) {
    if (!request.profile.training) {
      OnePiece(outputs, request);
    } else if (const std::string why = WhyUntrainable(outputs); !why.empty()) {
      throw InputError(Concat("training: ", why));  // what mpexec would say after the profile
    }
  };
  // Before profiling: what the graph alone refuses.
  const auto groups = request.split.empty() ? std::vector<std::vector<std::string>>{} : ParseLayerSplit(request.split);
  profile_request.check_graph = [groups, &request](const OpGraph& graph) {
    if (!groups.empty()) LayerSplitBounds(graph, PipelineOrder(graph), groups);  // names every layer, contiguous
    OneStage(graph, request);
  };
  const auto start = std::chrono::steady_clock::now();
  ProfiledModel profiled = ProfileModel(profile_request);
  const double total_ms = MsSince(start);
  result.load_ms = profiled.load_s * 1000;
  result.profile_ms = total_ms - result.load_ms;

  const Profile::ProbedLink& process_link = profiled.profile.process_link;
  const Profile::ProbedLink& allreduce_link = profiled.profile.allreduce_link;
  if (cpu_here) {
    // CPU workers share this machine. As threads of one process they pass
    // each other tensors by reference: a message costs the measured
    // hand-off, whatever its size. As processes (--processes), what the
    // link probe measured over Gloo.
    devices.cluster.shared_slowdown = profiled.profile.shared_slowdown;
    devices.cluster.step_overhead_ms = profiled.profile.step_overhead_ms;
    for (Link& link : devices.cluster.links) {
      link = request.processes && process_link.Measured() ? AsLink(process_link) : Link{0, profiled.profile.handoff_ms};
    }
  }
  // Each copy of the pipeline gets its own block of devices; they meet in
  // the gradient all-reduce over the devices' link, or, for CPU workers
  // (processes, over loopback), what the link probe measured (kLoopback
  // where it could not run).
  ReplicaLinks replica_links;
  replica_links.allreduce = !cpu_here                   ? LinkAt(devices.cluster, 0)
                            : allreduce_link.Measured() ? AfterStep(profiled.profile)
                                                        : kLoopback;
  if (cpu_here && process_link.Measured()) replica_links.boundary = AsLink(process_link);
  // The optimizer's step after each step, on each device's own parameters.
  if (request.profile.training) {
    devices.cluster.optimizer_ms_per_mib = OptimizerMsPerMib(profiled.profile, request.optimizer);
    if (cpu_here) devices.cluster.optimizer_slowdown = profiled.profile.optimizer_slowdown;
  }
  PlanRequest plan_request;
  plan_request.training = request.profile.training;
  plan_request.batch = profiled.profile.batch;
  plan_request.stages = request.stages;
  plan_request.microbatches = request.microbatches;
  plan_request.schedule = request.schedule;
  plan_request.chunks = request.chunks;
  plan_request.method = request.partitioner;
  plan_request.tie_tolerance = request.tie_tolerance;
  plan_request.optimizer = request.optimizer;
  plan_request.recompute = request.recompute;
  plan_request.device_tolerance = request.device_tolerance;
  plan_request.objective = request.objective;
  plan_request.layer_split = request.split;
  if (previous) {
    Plan now;  // what the previous plan must have been planned for
    now.model.graph_fingerprint = profiled.graph.fingerprint;
    now.training = request.profile.training;
    now.batch = profiled.profile.batch;
    now.devices = devices.devices;
    now.profile.source = profiled.profile.source;
    now.profile.device = profiled.profile.device;
    now.profile.threads = profiled.profile.threads;
    plan_request.previous = PreviousShape(*previous, now);
  }
  // Training joins no outputs: each micro-batch's loss is its own.
  const std::string one_piece = request.profile.training ? "" : OnePiece(profiled.outputs, request);
  if (!one_piece.empty()) plan_request.microbatches = 1;
  const std::string one_stage = OneStage(profiled.graph, request);
  if (!one_stage.empty()) plan_request.stages = 1;
  const auto search_start = std::chrono::steady_clock::now();
  const bool may_replicate = MayReplicate(request) && one_piece.empty() && one_stage.empty();
  const std::vector<int> counts =
      ReplicaCounts(request.gpus, may_replicate ? request.replicas : 1, profiled.profile, plan_request);
  if (counts.empty()) {
    throw InputError(Concat("--replicas auto: no replica count from 1 to ", request.gpus, " divides the batch (",
                            profiled.profile.batch, ")"));
  }
  // The replicas' wait for the latest of them, as the probe's two ranks
  // waited for each other: CPU workers of this machine.
  for (int r = 1; cpu_here && r <= counts.back(); ++r) {
    replica_links.wait_share.push_back(ReplicaWaitShare(profiled.profile, r));
  }
  ReplicaSearch measured = SearchReplicas(profiled, devices, counts, replica_links, plan_request, true);
  const double measure_ms = measured.measure_ms;
  if (!measured.added.empty() && !request.profile.profile_out.empty()) {
    // The file holds the sizes measured for the plan too, and the plan is
    // made from what it holds.
    profiled.profile = SaveProfile(profile_request, profiled.profile);
    measured = SearchReplicas(profiled, devices, counts, replica_links, plan_request, false);
  }
  const Cluster one_copy = devices.cluster;  // every device, no replicas: what a hand split (--split) runs on
  devices = measured.devices;
  const SearchResult& search = measured.search;
  result.profile_ms += measure_ms;
  PlanSource source;
  source.model_path = ModelPathFromPlan(request.profile.model_path, result.plan_path);
  source.model_sha256 = model_sha256;
  source.devices = devices.devices;
  source.profile_file = request.profile.profile_in;
  source.calibration = profiled.calibration;
  result.plan = BuildPlan(profiled.graph, profiled.profile, devices.cluster, plan_request, search, source);
  if (!one_piece.empty()) result.plan.warnings.insert(result.plan.warnings.begin(), one_piece);
  if (!one_stage.empty()) result.plan.warnings.insert(result.plan.warnings.begin(), one_stage);
  if (!request.profile.training) {
    if (std::string dropout = InferenceDropout(profiled.graph); !dropout.empty())
      result.plan.warnings.insert(result.plan.warnings.begin(), dropout);
  }
  result.partition_ms = MsSince(search_start) - measure_ms;
  const auto compare_start = std::chrono::steady_clock::now();
  result.plan.comparisons =
      ComparePartitioners(profiled.graph, profiled.profile, devices.cluster, one_copy, plan_request, result.plan);
  result.compare_ms = MsSince(compare_start);

  // What we write must be what mpexec reads: parse it back first.
  const std::string yaml = PlanToYaml(result.plan);
  CheckPlanAgainstGraph(ParsePlan(yaml, result.plan_path), profiled.graph, result.plan_path);
  WriteFileAtomically(result.plan_path, yaml, inputs);
  if (!request.report.empty()) {
    const std::string svg_name = fs::path(result.svg_path).filename().string();
    WriteFileAtomically(result.svg_path, GanttSvg(result.plan, SimulatePlan(result.plan)), inputs);
    WriteFileAtomically(request.report, FormatPlanMarkdown(result.plan, svg_name, true), inputs);
  }
  if (!request.dot.empty()) WriteFileAtomically(request.dot, GraphDot(profiled.graph, result.plan), inputs);
  result.graph = std::move(profiled.graph);
  return result;
}

nlohmann::json PlanResultJson(const PlanCommandResult& r) {
  const Plan& p = r.plan;
  nlohmann::json out;
  out["plan"] = r.plan_path;
  out["stages"] = p.stages.size();
  out["devices"] = p.programs.size();  // devices that run stages: fewer than stages where a device holds several
  out["microbatches"] = p.microbatches;
  out["microbatch_size"] = p.microbatch_size;
  out["replicas"] = p.replicas;
  out["allreduce_ms"] = p.predicted.allreduce_ms;
  out["schedule"] = ScheduleName(p.schedule);
  out["partitioner"] = p.partitioner;
  out["predicted_step_ms"] = p.predicted.step_ms;
  out["bottleneck_ms"] = p.predicted.bottleneck_ms;
  out["bubble_fraction"] = p.predicted.bubble_fraction;
  out["samples_per_s"] = p.predicted.samples_per_s;
  out["one_device_step_ms"] = p.predicted.one_device_step_ms;
  out["speedup_vs_one_device"] = p.predicted.speedup_vs_one_device;
  out["profile"] = {{"source", p.profile.source}, {"device", p.profile.device}, {"coverage", p.profile.coverage}};
  out["timing"] = {{"load_ms", r.load_ms},
                   {"profile_ms", r.profile_ms},
                   {"partition_ms", r.partition_ms},
                   {"compare_ms", r.compare_ms}};
  nlohmann::json stages = nlohmann::json::array();
  for (const PlanStage& s : p.stages) {
    stages.push_back({{"id", s.id},
                      {"device", s.device},
                      {"nodes", s.nodes},
                      {"layers", s.layers},
                      {"forward_ms", s.forward_ms},
                      {"backward_ms", s.backward_ms},
                      {"allreduce_ms", s.allreduce_ms},
                      {"peak_memory_bytes", s.peak_memory_bytes},
                      {"recompute", s.recompute}});
  }
  out["stage_list"] = stages;
  nlohmann::json comparisons = nlohmann::json::array();
  for (const PlanCandidate& c : p.comparisons) {
    comparisons.push_back({{"method", c.method},
                           {"stages", c.stages},
                           {"microbatches", c.microbatches},
                           {"schedule", ScheduleName(c.schedule)},
                           {"feasible", c.feasible},
                           {"step_ms", c.step_ms}});
  }
  out["comparisons"] = comparisons;
  out["warnings"] = p.warnings;
  if (!r.svg_path.empty()) out["svg"] = r.svg_path;
  return out;
}

}  // namespace mp
