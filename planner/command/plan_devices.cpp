// MakePlanDevices. Local CPU workers pass tensors by reference inside one
// process, so their link has no bandwidth limit; its latency, the measured
// hand-off between worker threads, is the profile's (plan_command.cpp). A
// local CUDA device without a device
// profile gets a PCIe 4.0 x16 link at its practical ~20 GB/s, the common case
// for a box of GPUs without NVLink. A device profile's link is its fastest.
#include "planner/command/plan_devices.h"

#include <unistd.h>

#include "common/error.h"
#include "planner/profile/device_profile.h"

namespace mp {
namespace {

int64_t PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? int64_t(pages) * page : kUnlimitedMemory;
}

}  // namespace

void CheckGpus(int gpus) {
  if (gpus < 1) throw InputError(Concat("--gpus must be at least 1, got ", gpus));
}

PlanDevices MakePlanDevices(int gpus, const std::string& device_profile, const std::string& local_device,
                            int64_t memory_bytes, double memory_headroom) {
  CheckGpus(gpus);
  if (!(memory_headroom >= 0 && memory_headroom <= 0.9)) {
    throw InputError(Concat("--memory-headroom must be from 0 to 90 (percent), got ", memory_headroom * 100));
  }
  PlanDevices out;
  Device device;
  Link link;
  PlanDevice described;
  if (!device_profile.empty()) {
    const DeviceProfile profile = LoadDeviceProfile(device_profile);
    device.name = profile.name;
    device.memory_bytes = profile.memory_bytes > 0 ? profile.memory_bytes : kUnlimitedMemory;
    link.bandwidth_bytes_per_s = profile.BestLinkBandwidth();
    link.latency_ms = profile.link_latency_us / 1000.0;
    described.type = profile.type;
  } else if (local_device.rfind("cuda", 0) == 0) {
    device.name = local_device;
    link.bandwidth_bytes_per_s = 20e9;
    link.latency_ms = 0.01;
    described.type = "cuda";
  } else {
    device.name = "cpu";
    device.memory_bytes = PhysicalMemoryBytes() / gpus;
    described.type = "cpu";
  }
  if (memory_bytes > 0) device.memory_bytes = memory_bytes;
  if (device.memory_bytes != kUnlimitedMemory) device.memory_headroom = memory_headroom;
  out.cluster = UniformCluster(gpus, device, link);
  for (int i = 0; i < gpus; ++i) {
    PlanDevice d = described;
    d.id = i;
    d.index = i;
    d.name = device.name;
    d.memory_bytes = device.memory_bytes == kUnlimitedMemory ? 0 : device.memory_bytes;
    d.memory_headroom = device.memory_headroom;
    d.speed = device.speed;
    out.devices.push_back(d);
  }
  return out;
}

}  // namespace mp
