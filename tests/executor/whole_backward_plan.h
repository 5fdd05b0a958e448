// Test helper: a split schedule's plan (zb-h1, zbv) edited so that some
// stages run B in place of each I and drop their W, as the planner's
// WithWholeBackward choice makes them: the runtime meets such stages only
// where the planner chose them, which the zoo's plans rarely do.
#pragma once

#include <string>
#include <vector>

#include "common/atomic_file.h"
#include "planner/plan/plan_reader.h"
#include "planner/plan/plan_writer.h"

namespace mp::test {

// Reads the plan at `path`, runs B on stage `stage`, and writes the result
// to `out`; returns `out`.
inline std::string WithWholeBackwardPlan(const std::string& path, int stage, const std::string& out) {
  Plan plan = ReadPlan(path);
  std::vector<bool> whole(plan.stages.size(), false);
  whole.at(stage) = true;
  const Schedule mixed = WithWholeBackward(PlanSchedule(plan), whole);
  for (size_t d = 0; d < plan.programs.size(); ++d) plan.programs[d].actions = mixed.actions[d];
  WriteFileAtomically(out, PlanToYaml(plan));
  return out;
}

}  // namespace mp::test
