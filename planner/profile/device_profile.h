// Device profiles: what a device can do on paper (peak FLOP/s per
// precision, memory bandwidth and size, links), read from profiles/*.yaml,
// for planning on devices that are not here.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mp {

struct DeviceProfile {
  std::string name;                 // A100-80GB
  std::string type;                 // cuda | cpu
  std::string file;                 // where it was read from
  int64_t memory_bytes = 0;
  double fp32_flops = 0, tf32_flops = 0, fp16_flops = 0, bf16_flops = 0;  // 0: not supported
  double memory_bandwidth = 0;      // bytes/s
  std::map<std::string, double> links;  // nvlink, pcie, host: bytes/s per direction
  double link_latency_us = 0;
  double compute_efficiency = 1;    // achievable fraction of peak FLOP/s
  double memory_efficiency = 1;     // achievable fraction of peak bandwidth
  double launch_overhead_us = 0;    // fixed cost of one op

  // The fastest link (NVLink before PCIe): bytes/s per direction.
  double BestLinkBandwidth() const;
};

// The directory of the bundled profiles: $MP_PROFILES_DIR if set, else
// the source tree's profiles/.
std::string ProfilesDir();

// Names of the bundled profiles (file stems: a100-80gb, h100-sxm, ...).
std::vector<std::string> BundledProfiles();

// The bundled profile `name` is, in any case (A100-80GB: a100-80gb), or ""
// where none is.
std::string BundledProfileName(const std::string& name);

// `name_or_file` is a path to a YAML file, or a bundled profile's name in
// any case (A100-80GB, a100-80gb). Throws InputError for an unknown name
// (listing the known ones), a missing key or a key it does not know.
DeviceProfile LoadDeviceProfile(const std::string& name_or_file);
DeviceProfile ParseDeviceProfile(const std::string& yaml, const std::string& source);

}  // namespace mp
