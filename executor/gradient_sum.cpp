#include "executor/gradient_sum.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "common/error.h"
#include "executor/process_group.h"

namespace mp {
namespace {

// Whether `grad` is the contiguous view of `buffer`'s elements [offset,
// offset + numel) that a sum into it left, held by its parameter alone.
bool InPlace(const at::Tensor& grad, const at::Tensor& buffer, int64_t offset, int64_t numel) {
  return grad.defined() && grad.is_alias_of(buffer) && grad.use_count() == 1 && grad.is_contiguous() &&
         grad.numel() == numel &&
         grad.data_ptr() == static_cast<char*>(buffer.data_ptr()) + offset * int64_t(buffer.element_size());
}

}  // namespace

int64_t SumGradients(ProcessGroup& group, const std::vector<at::Tensor>& params, GatherBuffers& kept,
                     const std::vector<bool>& held) {
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
    int64_t numel = 0, in_place = 0, aliased = 0;
    at::Tensor& last = kept.gathered[dtype];
    for (size_t i = 0; i < params.size(); ++i) {
      const at::Tensor& p = params[i];
      if (p.scalar_type() != dtype) continue;
      mine.push_back(i);
      if (last.defined() && p.grad().defined() && p.grad().is_alias_of(last)) {
        ++aliased;
        in_place += holds(i) && InPlace(p.grad(), last, numel, p.numel());
      }
      numel += p.numel();
    }
    // Nothing but the gradients in their places may view a kept buffer (one
    // out of its place would be overwritten while it is read, one a caller
    // holds would change under it): a new buffer otherwise.
    if (!(last.defined() && last.numel() == numel && aliased == in_place &&
          last.storage().use_count() == size_t(1 + in_place))) {
      last = at::empty({numel}, params[mine[0]].options());
    }
    const at::Tensor& flat = last;
    std::vector<bool> placed(mine.size(), false);  // already a view of its part
    int64_t offset = 0;
    for (size_t k = 0; k < mine.size(); ++k) {
      const at::Tensor& p = params[mine[k]];
      at::Tensor part = flat.narrow(0, offset, p.numel());
      if (!holds(mine[k]) || !p.grad().defined()) {
        part.zero_();
      } else if (!(placed[k] = InPlace(p.grad(), flat, offset, p.numel()))) {
        part.copy_(p.grad().reshape(-1));
      }
      offset += p.numel();
    }
    // Half and bfloat16 are summed in float32: LibTorch 1.13's Gloo has no
    // bfloat16 sum ("Invalid scalar type"), and a ring of R ranks rounds
    // once instead of R - 1 times.
    const bool reduced = dtype == at::kHalf || dtype == at::kBFloat16;
    at::Tensor wire = flat;
    if (reduced) {
      at::Tensor& kept_wire = kept.wire[dtype];
      if (!kept_wire.defined() || kept_wire.numel() != numel) {
        kept_wire = at::empty({numel}, flat.options().dtype(at::kFloat));
      }
      wire = kept_wire.copy_(flat);
    }
    group.AllReduceSum(wire);
    if (reduced) flat.copy_(wire);
    bytes += wire.numel() * int64_t(wire.element_size());
    offset = 0;
    for (size_t k = 0; k < mine.size(); ++k) {
      const at::Tensor& p = params[mine[k]];
      // A view of the summed buffer, not a copy.
      if (holds(mine[k]) && !placed[k]) p.mutable_grad() = flat.narrow(0, offset, p.numel()).view_as(p);
      offset += p.numel();
    }
  }
  return bytes;
}

bool ZeroIfKept(const GatherBuffers& kept, const at::Tensor& param) {
  const at::Tensor& grad = param.grad();
  if (!grad.defined() || grad.use_count() != 1) return false;
  const auto buffer = kept.gathered.find(grad.scalar_type());
  if (buffer == kept.gathered.end() || !buffer->second.defined() || !grad.is_alias_of(buffer->second)) return false;
  at::NoGradGuard no_grad;
  param.mutable_grad().zero_();
  return true;
}

}  // namespace mp
