// Adding micro-batch sizes measured later to a profile: the planner
// measures the sizes its best plans run at when the profile only
// interpolated them (planner/command/search_measured.h).
#pragma once

#include "planner/profile/profile.h"

namespace mp {

// Inserts `more`'s sizes, each node's times, spread, FLOPs, bytes moved
// and working memory at them, into `profile` in ascending order. A size
// both hold keeps `profile`'s entry. Everything else in `profile`
// (coverage, bands, contention, value bytes) stays as it was. Throws
// InternalError when `more` is not a profile of the same graph and mode.
void MergeSizes(Profile& profile, const Profile& more);

}  // namespace mp
