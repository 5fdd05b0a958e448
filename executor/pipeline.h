// The pipeline runtime's entry point and the plain structs it takes and
// returns: one worker thread per action list runs exactly that list from
// the plan (executor/runtime/device_worker.h); bounded channels between
// neighbouring stages carry each micro-batch's values forward and their
// gradients back, tagged with its id. The first failure in any stage closes
// every channel, the workers are joined, and the error is rethrown with its
// stage and micro-batch: never a hang.
#pragma once

#include <ATen/core/ivalue.h>

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "executor/gradient_sum.h"
#include "executor/loaded_plan.h"
#include "executor/training.h"

namespace mp {

class ProcessGroup;
class WireStreams;
class WorkerPool;

// Stages spread over processes (mpexec under torchrun or --launch-local):
// this process runs the stages its rank owns, and values and gradients that
// cross to another rank's stage go over `group` (executor/wire.h). A plan
// with R replicas runs on R blocks of world / R ranks, replica r on ranks
// [r * world / R, (r + 1) * world / R), each fed its share of the batch.
struct Distribution {
  ProcessGroup* group = nullptr;  // every rank
  std::shared_ptr<WireStreams> streams;  // on `group`: the boundaries' channels (executor/wire.h)
  std::vector<int> owner;         // per stage: the rank that runs it in this rank's replica
  int replica = 0;
  int replicas = 1;
  int ranks_per_replica = 1;
  // This rank's stages: the group of that stage's ranks in every replica,
  // which all-reduces its gradients (replicas > 1).
  std::map<int, ProcessGroup*> stage_groups;
  // What this rank's gradient sums gather into, kept from step to step
  // (SumGradients): by stage, -1 the tied parameters'. A cache a run of
  // the plan fills, so mutable.
  mutable std::map<int, GatherBuffers> gather_buffers;
};

struct PipelineOptions {
  int threads_per_stage = 0;  // intra-op threads per worker; 0: the plan's profile's, else 1
  const Distribution* distribution = nullptr;  // null: every stage in this process
  uint64_t seed = 0;  // random ops draw from (seed, step, micro-batch): planner/graph/rng_scope.h
  // Sample the CPU heap's peak during the step (PipelineRun::peak_heap_bytes):
  // a thread that wakes every millisecond and reads the heap under its lock,
  // which slowed the stages it shares the cores with by 6-11% (bench_exec
  // --only gap), so mpexec samples an untimed step. The memory meter, where
  // installed, counts each worker's tensors in that step too
  // (PipelineRun::device_step_peak_bytes).
  bool sample_heap = false;
};

// The intra-op threads each worker runs with under `options`.
int ThreadsPerStage(const Plan& plan, const PipelineOptions& options);

// The workers a plan runs on, a device each per replica: replica r's device
// d is worker r * devices + d (CPU workers' blocks of cores, common/cpu_affinity.h).
int PlanWorkers(const Plan& plan);

// What a training step adds to the forward pass.
struct TrainingStep {
  std::vector<at::Tensor> labels;  // one per micro-batch (SplitTensor of the batch's labels)
  int64_t batch_elements = 1;      // element count of the whole batch's labels
  LossKind loss = LossKind::kMse;
  size_t loss_tensor = 0;          // the output tensor it is taken on (LossTensor)
  LossReduction reduction = LossReduction::kMean;  // kOutput: the model's loss's (OwnLossReduction)
  Optimizer* optimizer = nullptr;  // steps every parameter once all stages are done
};

// Under a Distribution each rank fills in what its own stages did: busy_ms
// and events of the others stay empty, loss is the part its stages computed,
// and only rank 0 has the outputs (the other ranks send it theirs).
struct PipelineRun {
  int64_t step = 0;                  // the step index it ran as (its random ops' key)
  std::vector<c10::IValue> outputs;  // inference: the model's outputs for the whole batch
  double loss = 0;                   // training: the batch's loss (sum of the micro-batches')
  double grad_norm = 0;              // training with --clip-grad-norm: the gradients' total norm before it
  double optimizer_ms = 0;           // training: the optimizer's step (clipping included), the end of step_ms
  std::vector<double> device_optimizer_ms;  // per program: its own parameters' step; -1 where another rank's
  double step_ms = 0;                // wall time of the step (training: to the optimizer's step's end)
  int64_t start_ns = 0;              // when it started: steady clock, common to a host's processes
  std::vector<double> busy_ms;       // per stage: time in its forwards and backwards
  // Per stage: its gradient all-reduce among replicas (0 without), from
  // when the last replica was ready to its end; each rank alone knows its
  // own readiness (`allreduce_ready_ns`), so before GatherRuns this counts
  // from there, the wait for the other replicas' backward included.
  std::vector<double> allreduce_ms;
  std::vector<int64_t> allreduce_ready_ns;  // steady clock; 0 where none ran
  std::vector<std::vector<TimedAction>> events;  // per stage, in the order run
  int64_t peak_heap_bytes = -1;      // CPU heap in use at its highest (HeapSampler); -1: not sampled or unknown
  // Per program (device) of the plan: the most its worker's tensors added
  // to what it held at the step's start, at one moment (MemoryMeter), and
  // the gradients its backward added into where the last step's sums kept
  // them (ResetGradients, as if it had made them);
  // -1 where no meter is installed, the step did not sample memory
  // (PipelineOptions::sample_heap) or another process ran it.
  std::vector<int64_t> device_step_peak_bytes;
};

// Runs one step of the plan on CPU workers: forward-only for an inference
// plan (`training` null), forward, backward and SGD for a training plan.
// `model_inputs` are the full-batch inputs (the plan's input spec). Throws
// InputError when the plan's mode and `training` disagree or the inputs do
// not split into the plan's micro-batches; the first failure inside a
// stage or on its way to another rank (naming that rank) is rethrown as its
// own type (a LibTorch error as Error: the model failed), its message led
// by "stage S, micro-batch M: " (runtime/failure.h). A training step under
// a Distribution sums the gradients of a parameter that stages on several
// ranks read (tied weights) over the ranks before stepping it, and with
// replicas sums each stage's gradients over its replicas (the loss is
// normalised by the whole batch, so the sum is the whole batch's
// gradient); the step's time includes that. A plan with replicas needs a Distribution (InputError).
// The stages' workers (and bridges) run on `workers`, whose threads are
// kept from step to step. Each forward of micro-batch m (numbered over the
// whole batch) runs in RngScope({options.seed, step, m}).
PipelineRun RunPipeline(const LoadedPlan& loaded, const std::vector<c10::IValue>& model_inputs,
                        const TrainingStep* training, const PipelineOptions& options, WorkerPool& workers,
                        int64_t step = 0);

}  // namespace mp
