// A step as a Chrome trace (the JSON Perfetto and chrome://tracing load):
// what ran, one track per device (a stage's, where each device runs one),
// beside what the plan predicted.
#pragma once

#include <string>

#include "executor/pipeline.h"
#include "planner/plan/plan.h"

namespace mp {

// Process 1 "measured": one thread per device program ("stage 1", or
// "device 0 (stages 0,2)"), a complete event ("ph": "X") per action of
// `run`, in category compute, weight (W) or transfer. Process 2
// "predicted": the plan's simulated timeline (SimulatePlan), the same
// tracks, for overlay. Times in microseconds from the start of the step.
std::string ChromeTrace(const Plan& plan, const PipelineRun& run);

}  // namespace mp
