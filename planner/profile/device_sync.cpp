#include "planner/profile/device_sync.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <chrono>

namespace mp {

std::function<void()> DeviceSync(c10::Device device) {
  if (device.is_cpu()) return {};
  return [device] {
    const auto* impl = c10::impl::getDeviceGuardImpl(device.type());
    impl->getStream(device).synchronize();
  };
}

double SyncedMs(const std::function<void()>& work, const std::function<void()>& sync) {
  if (sync) sync();
  const auto start = std::chrono::steady_clock::now();
  work();
  if (sync) sync();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace mp
