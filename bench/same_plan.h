// Whether two plans run alike: the benchmarks' noise between identical
// runs is measured on such pairs.
#pragma once

#include "planner/plan/plan.h"

namespace mp::bench {

// The same replicas, stages, schedule and action lists.
inline bool SamePlan(const Plan& a, const Plan& b) {
  if (a.replicas != b.replicas || a.schedule != b.schedule || a.microbatches != b.microbatches ||
      a.stages.size() != b.stages.size() || a.programs.size() != b.programs.size())
    return false;
  for (size_t s = 0; s < a.stages.size(); ++s)
    if (a.stages[s].nodes != b.stages[s].nodes || a.stages[s].device != b.stages[s].device) return false;
  for (size_t p = 0; p < a.programs.size(); ++p)
    if (a.programs[p].actions != b.programs[p].actions) return false;
  return true;
}

}  // namespace mp::bench
