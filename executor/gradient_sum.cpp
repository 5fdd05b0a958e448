#include "executor/gradient_sum.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "common/error.h"
#include "executor/process_group.h"

namespace mp {

int64_t SumGradients(ProcessGroup& group, const std::vector<at::Tensor>& params, const std::vector<bool>& held) {
  if (!held.empty() && held.size() != params.size()) {
    throw InternalError(Concat("summing gradients: ", held.size(), " held flags for ", params.size(), " parameters"));
  }
  at::NoGradGuard no_grad;
  const auto holds = [&](size_t i) { return held.empty() || held[i]; };
  // One message per dtype, in the order each first appears (the same on
  // every rank: the same parameters).
  std::vector<c10::ScalarType> dtypes;
  for (const at::Tensor& p : params) {
    if (std::find(dtypes.begin(), dtypes.end(), p.scalar_type()) == dtypes.end()) dtypes.push_back(p.scalar_type());
  }
  int64_t bytes = 0;
  for (const c10::ScalarType dtype : dtypes) {
    std::vector<size_t> mine;
    std::vector<at::Tensor> parts;
    for (size_t i = 0; i < params.size(); ++i) {
      const at::Tensor& p = params[i];
      if (p.scalar_type() != dtype) continue;
      mine.push_back(i);
      parts.push_back(holds(i) && p.grad().defined() ? p.grad().reshape(-1) : at::zeros({p.numel()}, p.options()));
    }
    at::Tensor flat = at::cat(parts);
    // Half and bfloat16 are summed in float32: LibTorch 1.13's Gloo has no
    // bfloat16 sum ("Invalid scalar type"), and a ring of R ranks rounds
    // once instead of R - 1 times.
    const bool reduced = dtype == at::kHalf || dtype == at::kBFloat16;
    at::Tensor wire = reduced ? flat.to(at::kFloat) : flat;
    group.AllReduceSum(wire);
    if (reduced) flat.copy_(wire);
    bytes += wire.numel() * int64_t(wire.element_size());
    int64_t offset = 0;
    for (const size_t i : mine) {
      const at::Tensor& p = params[i];
      // A view of the summed buffer, not a copy.
      if (holds(i)) p.mutable_grad() = flat.narrow(0, offset, p.numel()).view_as(p);
      offset += p.numel();
    }
  }
  return bytes;
}

}  // namespace mp
