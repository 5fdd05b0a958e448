// What --explain compares the chosen plan with: the other partitioners at
// the chosen stage count, micro-batch count and schedule (on `cluster`, the
// chosen plan's copy of the pipeline), and a user's hand split (--split) at
// every split size that divides the batch, which is the tutorial's
// split-size sweep, predicted: a pipeline of its own on `whole` (every
// device, one copy, the whole batch), whether or not the plan has replicas.
#pragma once

#include <vector>

#include "planner/graph/op_graph.h"
#include "planner/partition/cluster.h"
#include "planner/partition/search.h"
#include "planner/plan/plan.h"
#include "planner/profile/profile.h"

namespace mp {

std::vector<PlanCandidate> ComparePartitioners(const OpGraph& graph, const Profile& profile, const Cluster& cluster,
                                                const Cluster& whole, const PlanRequest& request, const Plan& chosen);

}  // namespace mp
