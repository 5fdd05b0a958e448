#include "planner/profile/drift_reference.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>  // at::NoGradGuard (ATen.h leaves it out in LibTorch 2.x)

#include "planner/profile/device_sync.h"

namespace mp {
namespace {

// 128 x 128 x 128 multiply-adds (4 MFLOP) and 256 Ki floats (1 MiB) read
// and written three times: a compute-bound part and a memory-bound part,
// like the models' mix of matmuls and elementwise ops; about 1 ms on one
// core here.
constexpr int64_t kMatrix = 128;
constexpr int64_t kElements = 256 * 1024;

}  // namespace

struct DriftReference::Operands {
  at::Tensor a, b, x, y;
};

DriftReference::DriftReference(c10::Device device) : operands_(std::make_unique<Operands>()), sync_(DeviceSync(device)) {
  const auto options = at::TensorOptions().dtype(at::kFloat).device(device);
  // Fixed values (no generator): the same work in every process.
  operands_->a = at::linspace(-1, 1, kMatrix * kMatrix, options).reshape({kMatrix, kMatrix});
  operands_->b = operands_->a.t().contiguous();
  operands_->x = at::linspace(-1, 1, kElements, options);
  operands_->y = at::empty_like(operands_->x);
  TimeMs();
}

DriftReference::~DriftReference() = default;

double DriftReference::TimeMs() {
  Operands& o = *operands_;
  const auto work = [&o] {
    at::NoGradGuard no_grad;
    const at::Tensor c = at::mm(o.a, o.b);
    at::mul_out(o.y, o.x, 0.5);
    o.y.add_(o.x).relu_();
  };
  // Once untimed first, so the operands are in cache whatever ran before:
  // the time then says how fast the machine is, not what a step evicted.
  work();
  return SyncedMs(work, sync_);
}

}  // namespace mp
