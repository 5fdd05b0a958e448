// Checking a pipelined run against the model run whole on one device: the
// number a user relies on before trusting a plan.
#pragma once

#include <ATen/core/ivalue.h>

#include <vector>

#include "planner/graph/canonical_graph.h"

namespace mp {

struct Verification {
  bool ok = false;
  double max_abs_diff = 0;   // over every output tensor element
  int tensors = 0;           // output tensors compared
};

// The canonical graph run whole on `model_inputs` (one device, no micro-batches).
std::vector<c10::IValue> RunWhole(const CanonicalGraph& canonical, const std::vector<c10::IValue>& model_inputs);

// Same structure, dtypes and shapes, and values within rtol/atol: the
// micro-batch changes the summation order of float kernels (GEMM blocking),
// so equality is to float32 rounding, not bit for bit.
Verification Verify(const std::vector<c10::IValue>& got, const std::vector<c10::IValue>& want, double rtol = 1e-4,
                    double atol = 1e-5);

}  // namespace mp
