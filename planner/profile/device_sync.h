// Timing work on a device: wait for its queued work before the clock starts
// and before it stops (device-generic c10 streams, so no CUDA headers).
#pragma once

#include <c10/core/Device.h>

#include <functional>

namespace mp {

// Waits for the device's queued work; nothing to wait for on CPU.
std::function<void()> DeviceSync(c10::Device device);

// Milliseconds of `work` between two calls of `sync` (a DeviceSync; empty
// on CPU), so queued device work is inside the interval and nothing before.
double SyncedMs(const std::function<void()>& work, const std::function<void()>& sync);

}  // namespace mp
