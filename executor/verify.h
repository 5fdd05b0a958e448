// Checking a pipelined run against the model run whole on one device: the
// number a user relies on before trusting a plan.
#pragma once

#include <ATen/core/ivalue.h>

#include <string>
#include <vector>

#include "executor/loaded_plan.h"
#include "planner/graph/canonical_graph.h"

namespace mp {

struct Verification {
  bool ok = false;
  double max_abs_diff = 0;   // over every output tensor element
  int tensors = 0;           // output tensors compared
};

// The canonical graph run whole on `model_inputs` (one device, no
// micro-batches), without autograd, as an inference pipeline runs it.
std::vector<c10::IValue> RunWhole(const CanonicalGraph& canonical, const std::vector<c10::IValue>& model_inputs);

// The reference a pipelined run must equal bit for bit: the canonical graph
// run whole, without pipelining, on the same micro-batches, joined; the
// m-th in RngScope({seed, step, m}), as the pipeline's step `step` ran it.
std::vector<c10::IValue> RunWholeMicrobatches(const LoadedPlan& loaded, const std::vector<c10::IValue>& model_inputs,
                                              uint64_t seed = 0, int64_t step = 0);

// Same structure, dtypes and shapes, and values within rtol/atol (0 and 0:
// bit for bit). Against a run of the full batch in one go, a tolerance is
// needed: the micro-batch changes the summation order of float kernels.
Verification Verify(const std::vector<c10::IValue>& got, const std::vector<c10::IValue>& want, double rtol = 0,
                    double atol = 0);

// A trained state (or gradients) against a reference, tensor by tensor:
// the largest difference relative to the reference tensor's largest
// magnitude.
struct StateComparison {
  bool ok = false;
  double max_relative_diff = 0;
  std::string worst;         // the name of the tensor with that difference
  int tensors = 0;
};
StateComparison CompareState(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& want,
                             const std::vector<std::string>& names, double rtol);

}  // namespace mp
