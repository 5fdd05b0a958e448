// Whether a plan was made for the machine mpexec runs on. mpexec runs
// stages on this machine's CPU workers; a plan made for other devices (a
// device profile's estimates, or a profile measured on a GPU) predicts
// times for those devices, and comparing a CPU run with them means nothing
// (a 2 x A100 MLP plan read +90514%). Such a plan runs only on request
// (`--device cpu`), as a check that it runs and computes the right numbers.
#pragma once

#include <string>

#include "planner/plan/plan.h"

namespace mp {

struct PlannedDevices {
  bool here = true;      // measured on this machine's CPU, for CPU workers
  std::string what;      // "2 × A100-80GB (cuda)", "2 × cpu"
  std::string estimate;  // how its times were found: "measured on cpu", "analytic on A100-80GB"
};

PlannedDevices PlannedFor(const Plan& plan);

// The one-line refusal for a plan that is not for this machine.
std::string NotHereMessage(const std::string& plan_file, const PlannedDevices& devices, const Plan& plan);

}  // namespace mp
