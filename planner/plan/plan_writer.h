// Plan -> YAML text in format mpplan/v1 (docs/plan-format.md). Short lists
// (node ranges, shapes, actions) are written in flow style so a stage reads
// in a few lines; numbers carry enough digits to read back to the same text.
#pragma once

#include <string>

#include "planner/plan/plan.h"

namespace mp {

std::string PlanToYaml(const Plan& plan);

}  // namespace mp
