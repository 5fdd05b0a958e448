// Reading device profiles. Every key is required except `links` entries
// and the precisions a device lacks (written as 0); unknown keys are
// refused so a typo never silently falls back to a default.
#include "planner/profile/device_profile.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cmath>
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

// A number in [low, high] (> low when `open_low`), finite.
double NumberIn(const YamlCursor& c, double low, double high, bool open_low = false) {
  const double v = c.Number();
  if (!std::isfinite(v) || v < low || (open_low && v == low) || v > high) {
    c.Fail(Concat("expected a number ", open_low ? "> " : ">= ", low,
                  std::isinf(high) ? std::string() : Concat(" and <= ", high), ", found ", v));
  }
  return v;
}

constexpr double kAny = std::numeric_limits<double>::infinity();

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
  device.memory_bytes = static_cast<int64_t>(NumberIn(root["memory_bytes"], 0, 9.2e18));  // 1e9 or 1000000000
  const YamlCursor peak = root["peak_flops"];
  peak.ExpectMap({"fp32", "tf32", "fp16", "bf16"});
  device.fp32_flops = NumberIn(peak["fp32"], 0, kAny, true);
  device.tf32_flops = NumberIn(peak["tf32"], 0, kAny);
  device.fp16_flops = NumberIn(peak["fp16"], 0, kAny);
  device.bf16_flops = NumberIn(peak["bf16"], 0, kAny);
  device.memory_bandwidth = NumberIn(root["memory_bandwidth"], 0, kAny, true);
  const YamlCursor links = root["links"];
  const std::vector<std::string> names = links.Keys();
  if (names.empty()) links.Fail("expected a map of link name to bytes/s, found none");
  for (const std::string& name : names) device.links[name] = NumberIn(links[name], 0, kAny);
  device.link_latency_us = NumberIn(root["link_latency_us"], 0, kAny);
  const YamlCursor efficiency = root["efficiency"];
  efficiency.ExpectMap({"compute", "memory"});
  device.compute_efficiency = NumberIn(efficiency["compute"], 0, 1, true);
  device.memory_efficiency = NumberIn(efficiency["memory"], 0, 1, true);
  device.launch_overhead_us = NumberIn(root["launch_overhead_us"], 0, kAny);
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
