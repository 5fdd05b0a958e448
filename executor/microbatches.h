// Splitting a batch into the plan's micro-batches and joining the outputs
// back: what every pipelined run and every reference run share.
#pragma once

#include <ATen/core/ivalue.h>

#include <cstdint>
#include <string>
#include <vector>

#include "planner/graph/canonical_graph.h"
#include "planner/graph/input_spec.h"
#include "planner/plan/plan.h"

namespace mp {

// How the model's output tensors (FlattenTensors order over the outputs)
// relate to the batch.
struct OutputLayout {
  // The dimension of each output tensor that grows with the batch: the one
  // that doubles between runs at batch 1 and 2 (-1 where none does). [layers,
  // B, H] LSTM states are why the shapes alone cannot tell: at a micro-batch
  // of 2, layers is 2 as well.
  std::vector<int> batch_dims;
  std::vector<std::vector<int64_t>> shapes;  // each tensor's shape at batch 1 (per sample)
  std::vector<c10::ScalarType> dtypes;
  std::string error;  // why the probe failed (the layout is then empty)
  // Output tensor t's shape for `batch` samples.
  std::vector<int64_t> ShapeAt(size_t t, int64_t batch) const;
};

// Runs the graph at batch 2 and 4 to find the layout; empty, with `error`
// set, when the model refuses such batches (then no output can be joined
// or trained on).
OutputLayout ProbeOutputs(const CanonicalGraph& canonical, const std::vector<TensorSpec>& inputs);

// A full-batch tensor split along `dim` into the plan's micro-batches
// (Plan::microbatch_size each, the last may be smaller): replicas *
// microbatches of them, replica r's share's M micro-batches at [r * M, (r +
// 1) * M). InputError "WHAT: expected B samples along dimension D, ..."
// when it has not the plan's batch there.
std::vector<at::Tensor> SplitTensor(const Plan& plan, const at::Tensor& full, int dim, const std::string& what);

// The micro-batches of full-batch inputs: each tensor input split along its
// spec's batch dimension (SplitTensor) and copied, so that a model writing
// into its inputs leaves the caller's tensors as they were; other inputs are
// passed whole to every micro-batch.
std::vector<std::vector<c10::IValue>> SplitMicrobatches(const Plan& plan, const std::vector<c10::IValue>& inputs);

// Joins per-micro-batch outputs (outputs[mb][k]) back into whole-batch
// outputs: each tensor along its batch dimension, tuples element by element.
std::vector<c10::IValue> JoinMicrobatches(const std::vector<std::vector<c10::IValue>>& outputs,
                                          const std::vector<int>& batch_dims);

}  // namespace mp
