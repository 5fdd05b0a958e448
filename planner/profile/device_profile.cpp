// Reading device profiles. Every key is required except `links` entries
// and the precisions a device lacks (written as 0); unknown keys are
// refused so a typo never silently falls back to a default.
#include "planner/profile/device_profile.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <limits>

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/yaml_cursor.h"
#include "common/yaml_document.h"

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
  const YamlCursor root(LoadYamlDocument(yaml, source), source);
  root.ExpectMap({"name", "type", "memory_bytes", "peak_flops", "memory_bandwidth", "links", "link_latency_us",
                  "efficiency", "launch_overhead_us"});
  DeviceProfile device;
  device.file = source;
  device.name = root["name"].String();
  device.type = root["type"].String();
  if (device.type != "cuda" && device.type != "cpu") {
    root["type"].Fail("expected cuda or cpu, found '" + device.type + "'");
  }
  device.memory_bytes = static_cast<int64_t>(root["memory_bytes"].NumberIn(0, 9.2e18));  // 1e9 or 1000000000
  const YamlCursor peak = root["peak_flops"];
  peak.ExpectMap({"fp32", "tf32", "fp16", "bf16"});
  device.fp32_flops = peak["fp32"].NumberIn(0, YamlCursor::kNoLimit, "a number", true);
  device.tf32_flops = peak["tf32"].NumberIn(0, YamlCursor::kNoLimit);
  device.fp16_flops = peak["fp16"].NumberIn(0, YamlCursor::kNoLimit);
  device.bf16_flops = peak["bf16"].NumberIn(0, YamlCursor::kNoLimit);
  device.memory_bandwidth = root["memory_bandwidth"].NumberIn(0, YamlCursor::kNoLimit, "a number", true);
  const YamlCursor links = root["links"];
  const std::vector<std::string> names = links.Keys();
  if (names.empty()) links.Fail("expected a map of link name to bytes/s, found none");
  for (const std::string& name : names) device.links[name] = links[name].NumberIn(0, YamlCursor::kNoLimit);
  device.link_latency_us = root["link_latency_us"].NumberIn(0, YamlCursor::kNoLimit);
  const YamlCursor efficiency = root["efficiency"];
  efficiency.ExpectMap({"compute", "memory"});
  device.compute_efficiency = efficiency["compute"].NumberIn(0, 1, "a number", true);
  device.memory_efficiency = efficiency["memory"].NumberIn(0, 1, "a number", true);
  device.launch_overhead_us = root["launch_overhead_us"].NumberIn(0, YamlCursor::kNoLimit);
  return device;
}

std::string BundledProfileName(const std::string& name) {
  std::error_code ec;
  const std::string stem = Lower(name);
  return fs::is_regular_file(fs::path(ProfilesDir()) / (stem + ".yaml"), ec) ? stem : "";
}

DeviceProfile LoadDeviceProfile(const std::string& name_or_file) {
  std::error_code ec;
  if (fs::is_regular_file(name_or_file, ec))
    return ParseDeviceProfile(ReadTextFile(name_or_file, "device profile"), name_or_file);
  if (const std::string stem = BundledProfileName(name_or_file); !stem.empty()) {
    const std::string bundled = (fs::path(ProfilesDir()) / (stem + ".yaml")).string();
    return ParseDeviceProfile(ReadTextFile(bundled, "device profile"), bundled);
  }
  std::string known;
  for (const auto& name : BundledProfiles()) known += (known.empty() ? "" : ", ") + name;
  throw InputError(Concat("unknown device profile '", name_or_file, "' (known: ", known,
                          "; or give a path to a YAML file)"));
}

}  // namespace mp
