// PlannedFor and NotHereMessage: which devices a plan's times are for,
// read from its devices and profile, and the one line that says so.
#include "executor/planned_devices.h"

#include <map>
#include <vector>

#include "common/error.h"

namespace mp {

PlannedDevices PlannedFor(const Plan& plan) {
  PlannedDevices out;
  // Device names in the order they first appear, with their counts.
  std::vector<std::string> names;
  std::map<std::string, int> count;
  bool all_cpu = true;
  for (const PlanDevice& d : plan.devices) {
    const std::string name = d.name + (d.type == d.name ? "" : " (" + d.type + ")");
    if (count[name]++ == 0) names.push_back(name);
    all_cpu = all_cpu && d.type == "cpu";
  }
  for (size_t i = 0; i < names.size(); ++i) out.what += Concat(i ? ", " : "", count[names[i]], " \xC3\x97 ", names[i]);
  out.estimate = plan.profile.source + (plan.profile.device.empty() ? "" : " on " + plan.profile.device);
  out.here = all_cpu && plan.profile.source == "measured";
  return out;
}

std::string NotHereMessage(const std::string& plan_file, const PlannedDevices& devices, const Plan& plan) {
  return Concat(plan_file, ": devices: planned for ", devices.what, " with times ", devices.estimate,
                ", not for this machine's CPU workers: run it on CPU workers for checking with --device cpu, "
                "or plan for them here (mpplan MODEL --gpus ",
                plan.devices.size(), ", without --device-profile)");
}

}  // namespace mp
