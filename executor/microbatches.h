// Splitting a batch into the plan's micro-batches and joining the outputs
// back: what every pipelined run and every reference run share.
#pragma once

#include <ATen/core/ivalue.h>

#include <cstdint>
#include <string>
#include <vector>

#include "planner/graph/canonical_graph.h"
#include "planner/graph/input_spec.h"
#include "planner/graph/output_layout.h"
#include "planner/plan/plan.h"

namespace mp {

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
                                          const OutputLayout& layout);

}  // namespace mp
