// The search, at micro-batch sizes the profile measured. A profile times
// each node at a few sizes (1, B^1/3, B^2/3, B) and the search reads the
// sizes between them off a straight line, but time is not a straight line
// in the micro-batch size: the zoo's Branchy runs 8 samples 15% slower
// than the line from 6 to 16 says (a convolution changes kernel at 16),
// and its plans at 8 ran 20% over their prediction. So when the plan the
// search chooses, or the fastest it found (the tie window's reference),
// runs at a size the profile only interpolated, that size is measured
// (beside a size the profile holds, which sets its pace to the profile's:
// PaceToAnchor, merge_sizes.h), the profile gains it, and the search runs
// again, until both are measured (at most kMeasureRounds rounds).
#pragma once

#include <cstdint>
#include <vector>

#include "planner/partition/search.h"
#include "planner/profile/profile_command.h"

namespace mp {

constexpr int kMeasureRounds = 3;

struct MeasuredSearch {
  SearchResult search;
  std::vector<int64_t> added;  // the sizes measured for it, in the order measured
  double measure_ms = 0;       // wall time spent measuring them
};

// SearchPlan on profiled.profile, which gains the sizes measured; without
// profiled.measure_sizes (a profile from a file, a device profile, the
// user's --microbatch-sizes), SearchPlan alone. `memo` as SearchPlan's,
// cleared when the profile gains a size.
MeasuredSearch SearchAtMeasuredSizes(ProfiledModel& profiled, const Cluster& cluster, const PlanRequest& request,
                                     SearchMemo* memo = nullptr);

// The micro-batch sizes of `search`'s chosen and fastest alternatives that
// `profile` does not hold, chosen first.
std::vector<int64_t> UnmeasuredSizes(const SearchResult& search, const Profile& profile);

}  // namespace mp
