// RunPipeline: one step of a plan, put together from the runtime's parts
// (executor/runtime/): the stage layout computed when the plan was loaded,
// the links between stages (and bridges to other ranks), one DeviceWorker
// per action list, then gradient sync and the optimizer step (training) or
// the outputs gathered (inference). Under a Distribution a process runs the
// workers of its own stages only. The first failure anywhere closes every
// link and aborts the process group, so nothing waits forever, and is
// rethrown with its type, stage and micro-batch.
#include "executor/pipeline.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <optional>

#include "common/cpu_affinity.h"
#include "common/error.h"
#include "common/worker_pool.h"
#include "executor/heap_sampler.h"
#include "planner/profile/memory_meter.h"
#include "executor/process_group.h"
#include "executor/runtime/bridges.h"
#include "executor/runtime/device_worker.h"
#include "executor/runtime/failure.h"
#include "executor/runtime/gradient_sync.h"
#include "executor/runtime/links.h"
#include "executor/runtime/output_gather.h"
#include "executor/scoped_threads.h"
#include "planner/profile/timer.h"

namespace mp {
namespace {

using Clock = std::chrono::steady_clock;

void CheckRequest(const LoadedPlan& loaded, const TrainingStep* training, const Distribution* dist) {
  const Plan& plan = loaded.plan;
  if (plan.training != (training != nullptr)) {
    throw InputError(plan.training ? "this is a training plan (mode: train): run it with labels and an optimizer"
                                   : "this is an inference plan (mode: infer): it has no backward to train with");
  }
  if (plan.replicas > 1 && (!dist || dist->replicas != plan.replicas)) {
    const int K = int(plan.programs.size());
    throw InputError(Concat("this plan has ", plan.replicas, " replicas of the pipeline: run it as ", plan.replicas,
                            " x 1 to ", plan.replicas, " x ", K, " processes (--launch-local ", plan.replicas * K,
                            ", or under torchrun)"));
  }
  if (training) {
    const size_t k = size_t(loaded.output_layout.output_of.at(training->loss_tensor));
    if (k >= loaded.layout.output_stage.size() || loaded.layout.output_stage[k] < 0) {
      throw InputError(Concat("training needs the model's output ", k,
                              ", its loss, to be computed, not passed through"));
    }
  }
}

// One device's ordered action list and the cores its worker runs on.
struct WorkerList {
  int device = 0;  // its program's index: what the memory meter charges it to
  std::vector<Action> actions;
  std::vector<int> cpus;  // empty: wherever the scheduler puts it
};

// The ordered action lists this process runs, one worker each: a plan
// lists each device's actions over its stages (Distribute gives all of a
// program's stages to one rank). Device d of replica r is CPU worker
// r * devices + d; with MP_PIN_CPUS=1 it runs on that worker's cores, as
// the profiler's probe ran worker d (common/cpu_affinity.h).
std::vector<WorkerList> WorkerLists(const Plan& plan, const Distribution* dist, int threads) {
  std::vector<WorkerList> lists;
  const int rank = dist ? dist->group->rank() : 0;
  const int devices = int(plan.programs.size());
  const int replica = dist ? dist->replica : 0;
  for (int p = 0; p < devices; ++p) {
    const PlanProgram& program = plan.programs[p];
    if (program.actions.empty()) continue;
    if (!dist || dist->owner.at(program.actions.front().stage) == rank) {
      lists.push_back({p, program.actions, WorkerCpus(replica * devices + p, PlanWorkers(plan), threads)});
    }
  }
  return lists;
}

}  // namespace

int PlanWorkers(const Plan& plan) { return int(plan.programs.size()) * plan.replicas; }

int ThreadsPerStage(const Plan& plan, const PipelineOptions& options) {
  return options.threads_per_stage > 0 ? options.threads_per_stage : std::max(1, plan.profile.threads);
}

PipelineRun RunPipeline(const LoadedPlan& loaded, const std::vector<c10::IValue>& model_inputs,
                        const TrainingStep* training, const PipelineOptions& options, WorkerPool& workers,
                        int64_t step) {
  const Plan& plan = loaded.plan;
  const Distribution* dist = options.distribution;
  CheckRequest(loaded, training, dist);
  const int K = int(loaded.stages.size());
  const int M = plan.microbatches;
  // Every replica's micro-batches; this rank's replica runs M of them from `first`.
  const auto microbatches = SplitMicrobatches(plan, model_inputs);
  const int first = dist ? dist->replica * M : 0;
  if (training && training->labels.size() != microbatches.size()) {
    throw InternalError(Concat(training->labels.size(), " label micro-batches for ", microbatches.size(),
                               " micro-batches"));
  }
  const std::vector<int64_t> kept_gradients =
      training ? ResetGradients(loaded, dist) : std::vector<int64_t>(plan.programs.size(), 0);

  Links links(K, M);
  Failure failure([&] {
    links.CloseAll();
    if (dist) dist->group->Abort();
  });
  const int threads = ThreadsPerStage(plan, options);
  // This thread's own work (splitting, gathering, the gradients' sums)
  // runs on one intra-op thread: a team of its own would outlive that work
  // and, counted with the stages' teams, make them wait on futexes
  // (RunOnOwnThread, scoped_threads.h: a one-stage MLP plan of 2 threads
  // stepped Adam in 14-15 ms against 7-10); with more threads, a team's
  // threads spin after each region on the cores the next step's stages
  // need (ConvNet, 2 stages of 1 thread on 2 cores: 16-17 ms a step,
  // 13.5-15.5 with this thread at 1). It keeps that count after the step:
  // setting and restoring it around every step cost each step (UseThreads).
  UseThreads(1);
  std::optional<HeapSampler> heap;
  if (options.sample_heap) heap.emplace();
  MemoryMeter* meter = options.sample_heap ? MemoryMeter::Installed() : nullptr;
  const int devices = int(plan.programs.size());
  std::vector<int64_t> live_before(devices, 0);
  if (meter) {
    for (int d = 0; d < devices; ++d) live_before[d] = meter->Live(d);
    meter->ResetPeaks();
  }
  std::optional<MemoryMeter::CountingScope> counting(meter);
  const Clock::time_point start = Clock::now();
  const StepContext context{loaded, microbatches, first, training, options, step, start, links};
  StepResults results(K, M);

  std::vector<std::function<void()>> jobs;
  std::vector<int> mine;  // the programs this process runs
  std::map<int, std::vector<int>> cpus_of;  // their workers' cores
  for (auto& list : WorkerLists(plan, dist, threads)) {
    mine.push_back(list.device);
    cpus_of[list.device] = list.cpus;
    jobs.push_back([&, list = std::move(list)] {
      const ScopedPin pin(list.cpus);  // a pool thread may run another job next step
      const MemoryMeter::Scope owner(list.device);
      DeviceWorker worker(context, results, list.actions);
      try {
        UseThreads(threads);  // a pool thread keeps its count from step to step
        std::optional<at::NoGradGuard> no_grad;
        if (!training) no_grad.emplace();
        worker.Run();
      } catch (...) {
        failure.Record(worker.Current().stage, worker.Current().microbatch, std::current_exception());
      }
    });
  }
  if (dist) {
    for (auto& job : BridgeJobs(links, *dist, loaded.layout.boundary, M, training != nullptr, failure)) {
      jobs.push_back(std::move(job));
    }
  }
  workers.RunAll(std::move(jobs));  // every job at once, each on a thread of its own

  PipelineRun run;
  run.step = step;
  run.step_ms = MsSince(start);
  run.start_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(start.time_since_epoch()).count();
  run.peak_heap_bytes = heap ? heap->Stop() : -1;
  run.device_step_peak_bytes.assign(devices, -1);
  counting.reset();
  if (meter) {
    for (int d : mine) {
      // Workers past the meter's count share its "outside" slot: unknown.
      // The gradients kept in the sums' buffers through the step count as
      // made in it: a step without them (the first) makes them itself.
      if (d < MemoryMeter::kOwners) {
        run.device_step_peak_bytes[d] = meter->Peak(d) - live_before[d] + kept_gradients[d];
      }
    }
  }
  run.busy_ms = std::move(results.busy_ms);
  run.events = std::move(results.events);
  failure.RethrowIfFailed();
  if (!training) {
    run.allreduce_ms.assign(K, 0);
    run.outputs = GatherOutputs(loaded, dist, std::move(results.made));
    return run;
  }
  run.allreduce_ms.assign(K, 0);
  run.allreduce_ready_ns.assign(K, 0);
  const std::vector<AllReduceSpan> spans = SyncGradients(loaded, dist);
  for (size_t s = 0; s < spans.size(); ++s) {
    run.allreduce_ready_ns[s] = spans[s].ready_ns;
    run.allreduce_ms[s] = double(spans[s].end_ns - spans[s].ready_ns) / 1e6;
  }
  if (dist && dist->replicas > 1) run.step_ms = MsSince(start);  // the plan's step ends after it too
  if (training->optimizer) {
    // Each device steps its own parameters, at once, on its worker's cores.
    const Clock::time_point optimizer_start = Clock::now();
    Optimizer& optimizer = *training->optimizer;
    run.grad_norm = ClipGradientNorm(loaded, dist, optimizer);
    run.device_optimizer_ms.assign(devices, -1);
    for (int d : mine) run.device_optimizer_ms[d] = 0;
    std::vector<std::function<void()>> steps;
    for (auto& [device, params] : StepsByDevice(loaded, dist)) {
      steps.push_back([&, device = device, cpus = cpus_of[device], params = std::move(params)] {
        const ScopedPin pin(cpus);
        UseThreads(threads);
        const Clock::time_point begin = Clock::now();
        std::vector<at::Tensor> tensors;
        for (size_t i : params) tensors.push_back(loaded.canonical.params[i].tensor);
        optimizer.Step(params, tensors);
        run.device_optimizer_ms[device] = MsSince(begin);
      });
    }
    workers.RunAll(std::move(steps));
    run.optimizer_ms = MsSince(optimizer_start);
    run.step_ms = MsSince(start);  // the plan's step ends after it too
  }
  for (const auto& stage_losses : results.losses) {
    for (const at::Tensor& loss : stage_losses) run.loss += loss.item<double>();
  }
  return run;
}

}  // namespace mp
