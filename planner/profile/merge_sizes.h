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

// The size of `profile` to measure again beside `size` when `size` is
// added: the largest it holds below `size` (a smaller one costs less to
// run again), else the smallest above.
int64_t AnchorSize(const Profile& profile, int64_t size);

// Sets `more`'s node times (forward, backward, I and W) to `profile`'s
// pace: scales them by the nodes' total at `anchor` in `profile` over the
// same in `more`, which measured it again beside its own sizes. A size
// added later ran in another stretch of a shared machine, where the
// profile's sizes took turns pass by pass so that a slow stretch fell on
// all of them alike: the GPT's size 4, added to a profile of 1, 3, 6, 8
// and 16, read 15.6 ms a sample between 11.9 at 3 and 11.5 at 6.
// Returns the factor; 1 where either lacks the anchor or its total is 0.
double PaceToAnchor(Profile& more, const Profile& profile, int64_t anchor);

}  // namespace mp
