#include "executor/drift.h"

#include <ATen/Parallel.h>
#include <c10/core/Device.h>
#include <torch/cuda.h>

#include "planner/profile/timer.h"

namespace mp {

DriftProbe::DriftProbe(const Plan& plan) : plan_(plan) {
  if (plan.profile.source != "measured" || !(plan.profile.reference_ms > 0)) return;
  c10::Device device(c10::kCPU);
  try {
    device = c10::Device(plan.profile.device);
  } catch (const c10::Error&) {
    return;
  }
  if (device.is_cuda() && (!torch::cuda::is_available() || device.index() >= int(torch::cuda::device_count())))
    return;
  reference_ = std::make_unique<DriftReference>(device);
}

DriftProbe::~DriftProbe() = default;

void DriftProbe::Sample(int samples) {
  if (!reference_) return;
  const int threads = at::get_num_threads();
  if (plan_.profile.threads > 0 && plan_.profile.threads != threads) at::set_num_threads(plan_.profile.threads);
  for (int i = 0; i < samples; ++i) samples_.push_back(reference_->TimeMs());
  if (at::get_num_threads() != threads) at::set_num_threads(threads);
}

Drift DriftProbe::Result() const {
  Drift drift;
  if (samples_.empty()) return drift;
  drift.now_ms = Quantile(samples_, 0.5);
  drift.factor = drift.now_ms / plan_.profile.reference_ms;
  drift.measured = true;
  return drift;
}

}  // namespace mp
