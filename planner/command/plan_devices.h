// The devices a plan is made for: N copies of a device profile's device
// (--device-profile), or N workers of this machine (its CPU cores shared
// among the stages, or its CUDA device), each with the memory limit
// --memory gives or the device's own, joined by that device's link.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/partition/cluster.h"
#include "planner/plan/plan.h"

namespace mp {

struct PlanDevices {
  Cluster cluster;
  std::vector<PlanDevice> devices;  // the same devices as the executor addresses them
};

// Throws InputError "--gpus must be at least 1, got N" below 1.
void CheckGpus(int gpus);

// memory_bytes 0: the device's own memory (a device profile's, or this
// machine's RAM divided among the CPU workers; unlimited for a local CUDA
// device). Plans leave memory_headroom (a fraction, at most 0.9) of it
// free. Throws InputError for gpus < 1, an unknown device profile or a
// headroom out of range.
PlanDevices MakePlanDevices(int gpus, const std::string& device_profile, const std::string& local_device,
                            int64_t memory_bytes, double memory_headroom);

}  // namespace mp
