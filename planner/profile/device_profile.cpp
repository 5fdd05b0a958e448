// Reading device profiles. Every key is required except `links` entries
// and the precisions a device lacks (written as 0); unknown keys are
// refused so a typo never silently falls back to a default.
#include "planner/profile/device_profile.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>

#include "common/atomic_file.h"
#include "common/error.h"
#include "planner/profile/yaml_document.h"

#ifndef MP_SOURCE_PROFILES_DIR
#define MP_SOURCE_PROFILES_DIR "profiles"
#endif

namespace mp {
namespace fs = std::filesystem;

namespace {

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

void CheckKeys(const YAML::Node& map, const std::vector<std::string>& known, const std::string& where) {
  if (!map.IsMap()) throw InputError(Concat(where, ": expected a mapping"));
  for (const auto& item : map) {
    const auto key = item.first.as<std::string>();
    if (std::find(known.begin(), known.end(), key) == known.end())
      throw InputError(Concat(where, ": unknown key '", key, "'"));
  }
}

double Number(const YAML::Node& map, const std::string& key, const std::string& where) {
  const YAML::Node node = map[key];
  if (!node) throw InputError(Concat(where, ": missing key '", key, "'"));
  try {
    const double value = node.as<double>();
    if (value < 0) throw InputError(Concat(where, ".", key, ": must not be negative, got ", value));
    return value;
  } catch (const YAML::Exception&) {
    throw InputError(Concat(where, ".", key, ": expected a number, got '", node.Scalar(), "'"));
  }
}

}  // namespace

double DeviceProfile::BestLinkBandwidth() const {
  double best = 0;
  for (const auto& [name, bandwidth] : links) best = std::max(best, bandwidth);
  return best;
}

std::string ProfilesDir() {
  if (const char* dir = std::getenv("MP_PROFILES_DIR")) return dir;
  return MP_SOURCE_PROFILES_DIR;
}

std::vector<std::string> BundledProfiles() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(ProfilesDir(), ec))
    if (entry.path().extension() == ".yaml") names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

DeviceProfile ParseDeviceProfile(const std::string& yaml, const std::string& source) {
  const YAML::Node root = LoadYamlDocument(yaml, source);
  CheckKeys(root, {"name", "type", "memory_bytes", "peak_flops", "memory_bandwidth", "links", "link_latency_us",
                   "efficiency", "launch_overhead_us"},
            source);
  DeviceProfile device;
  device.file = source;
  if (!root["name"] || !root["type"]) throw InputError(Concat(source, ": missing key 'name' or 'type'"));
  device.name = root["name"].as<std::string>();
  device.type = root["type"].as<std::string>();
  if (device.type != "cuda" && device.type != "cpu")
    throw InputError(Concat(source, ": type: expected cuda or cpu, got '", device.type, "'"));
  device.memory_bytes = static_cast<int64_t>(Number(root, "memory_bytes", source));
  const YAML::Node peak = root["peak_flops"];
  if (!peak) throw InputError(Concat(source, ": missing key 'peak_flops'"));
  CheckKeys(peak, {"fp32", "tf32", "fp16", "bf16"}, source + ": peak_flops");
  device.fp32_flops = Number(peak, "fp32", source + ": peak_flops");
  if (device.fp32_flops <= 0) throw InputError(Concat(source, ": peak_flops.fp32 must be positive"));
  device.tf32_flops = Number(peak, "tf32", source + ": peak_flops");
  device.fp16_flops = Number(peak, "fp16", source + ": peak_flops");
  device.bf16_flops = Number(peak, "bf16", source + ": peak_flops");
  device.memory_bandwidth = Number(root, "memory_bandwidth", source);
  if (device.memory_bandwidth <= 0) throw InputError(Concat(source, ": memory_bandwidth must be positive"));
  const YAML::Node links = root["links"];
  if (!links || !links.IsMap() || links.size() == 0)
    throw InputError(Concat(source, ": links: expected a mapping of link name to bytes/s"));
  for (const auto& link : links) {
    const auto name = link.first.as<std::string>();
    device.links[name] = Number(links, name, source + ": links");
  }
  device.link_latency_us = Number(root, "link_latency_us", source);
  const YAML::Node efficiency = root["efficiency"];
  if (!efficiency) throw InputError(Concat(source, ": missing key 'efficiency'"));
  CheckKeys(efficiency, {"compute", "memory"}, source + ": efficiency");
  device.compute_efficiency = Number(efficiency, "compute", source + ": efficiency");
  device.memory_efficiency = Number(efficiency, "memory", source + ": efficiency");
  if (device.compute_efficiency <= 0 || device.compute_efficiency > 1 || device.memory_efficiency <= 0 ||
      device.memory_efficiency > 1)
    throw InputError(Concat(source, ": efficiency values must lie in (0, 1]"));
  device.launch_overhead_us = Number(root, "launch_overhead_us", source);
  return device;
}

DeviceProfile LoadDeviceProfile(const std::string& name_or_file) {
  std::error_code ec;
  if (fs::is_regular_file(name_or_file, ec))
    return ParseDeviceProfile(ReadTextFile(name_or_file, "device profile"), name_or_file);
  const fs::path bundled = fs::path(ProfilesDir()) / (Lower(name_or_file) + ".yaml");
  if (fs::is_regular_file(bundled, ec))
    return ParseDeviceProfile(ReadTextFile(bundled.string(), "device profile"), bundled.string());
  std::string known;
  for (const auto& name : BundledProfiles()) known += (known.empty() ? "" : ", ") + name;
  throw InputError(Concat("unknown device profile '", name_or_file, "' (known: ", known,
                          "; or give a path to a YAML file)"));
}

}  // namespace mp
