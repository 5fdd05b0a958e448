// The in-process pipeline runtime: one worker thread per stage runs exactly
// its action list from the plan; bounded channels between neighbouring
// stages carry each micro-batch's values, tagged with its id. The first
// failure in any stage closes every channel, the workers are joined, and the
// error is rethrown with its stage and micro-batch: never a hang.
#pragma once

#include <c10/core/Device.h>
#include <ATen/core/ivalue.h>

#include <vector>

#include "executor/loaded_plan.h"

namespace mp {

struct PipelineOptions {
  int threads_per_stage = 0;  // intra-op threads per worker; 0: the plan's profile's, else 1
};

struct PipelineRun {
  std::vector<c10::IValue> outputs;  // the model's outputs for the whole batch, micro-batches in order
  double step_ms = 0;                // wall time of the step
  std::vector<double> busy_ms;       // per stage: time in its forwards
};

// Runs one forward-only step of an inference plan on CPU workers.
// `model_inputs` are the full-batch inputs (the plan's input spec). Throws
// InputError for a training plan (not runnable yet) or inputs that do not
// split into the plan's micro-batches, and Error "stage S, micro-batch M:
// ..." for the first failure inside a stage.
PipelineRun RunInference(const LoadedPlan& loaded, const std::vector<c10::IValue>& model_inputs,
                         const PipelineOptions& options = {});

// The micro-batches of full-batch inputs: each tensor input split along its
// spec's batch dimension into M parts of Plan::microbatch_size (the last
// may be smaller); other inputs are passed whole to every micro-batch.
std::vector<std::vector<c10::IValue>> SplitMicrobatches(const Plan& plan, const std::vector<c10::IValue>& inputs);

// Joins per-micro-batch outputs (outputs[mb][k]) back into whole-batch
// outputs: each tensor along its batch dimension (batch_dims, in
// FlattenTensors order over the outputs), tuples element by element.
std::vector<c10::IValue> JoinMicrobatches(const std::vector<std::vector<c10::IValue>>& outputs,
                                          const std::vector<int>& batch_dims);

// The batch dimension of every output tensor (FlattenTensors order): the one
// that doubles between runs at batch 1 and 2 (-1 where none does; empty when
// the model refuses such batches). [layers, B, H] LSTM states are why the
// parts alone cannot tell: at a micro-batch of 2, layers is 2 as well.
std::vector<int> OutputBatchDims(const CanonicalGraph& canonical, const std::vector<TensorSpec>& inputs);

}  // namespace mp
