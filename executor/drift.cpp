// DriftProbe: the drift reference timed around the steps, on the plan's
// device, with the thread count the profile used; the median of its
// samples over the profiled time is the machine's drift factor.
#include "executor/drift.h"

#include <c10/core/Device.h>
#include <torch/cuda.h>

#include "executor/scoped_threads.h"
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
  const ScopedThreads profiled(plan_.profile.threads);
  for (int i = 0; i < samples; ++i) samples_.push_back(reference_->TimeMs());
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
