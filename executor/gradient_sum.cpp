#include "executor/gradient_sum.h"

#include <ATen/ATen.h>

#include "common/error.h"
#include "executor/process_group.h"

namespace mp {

int64_t SumGradients(ProcessGroup& group, const std::vector<at::Tensor>& params, const std::vector<bool>& held) {
  if (!held.empty() && held.size() != params.size()) {
    throw InternalError(Concat("summing gradients: ", held.size(), " held flags for ", params.size(), " parameters"));
  }
  if (params.empty()) return 0;
  at::NoGradGuard no_grad;
  const auto holds = [&](size_t i) { return held.empty() || held[i]; };
  std::vector<at::Tensor> parts;
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& p = params[i];
    parts.push_back(holds(i) && p.grad().defined() ? p.grad().reshape(-1) : at::zeros({p.numel()}, p.options()));
  }
  at::Tensor flat = at::cat(parts);
  group.AllReduceSum(flat);
  int64_t offset = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& p = params[i];
    // A view of the summed buffer, not a copy.
    if (holds(i)) p.mutable_grad() = flat.narrow(0, offset, p.numel()).view_as(p);
    offset += p.numel();
  }
  return flat.numel() * int64_t(flat.element_size());
}

}  // namespace mp
