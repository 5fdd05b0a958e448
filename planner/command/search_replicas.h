// The search over data-parallel replicas too (mpplan --replicas auto):
// for each replica count R, the pipeline search on a block of --gpus / R
// devices for batch / R samples, each stage's gradients all-reduced among
// its R copies (SearchPlan with Cluster::replicas); then the choice among
// the R's plans as SearchPlan makes it among its own alternatives: every
// plan within the wider of the tie window and the device tolerance of the
// fastest is kept, the fewest devices (R x devices per copy) win, and among
// the plans on those, within the tie window of their fastest, the one with
// fewer stages a replica (more replicas: no bubble, one all-reduce a step
// instead of a transfer a micro-batch), then the faster. The
// previous plan's shape (PlanRequest::previous), where its count's search
// kept it, stays while it is within the tie window of the fastest of every
// count.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "planner/command/plan_devices.h"
#include "planner/command/search_measured.h"
#include "planner/partition/search.h"
#include "planner/profile/profile_command.h"

namespace mp {

// The replica counts to search: `replicas` when above 0, else every R from
// 1 to `gpus` that divides `batch`, leaves each copy `stages` devices (when
// fixed) and each copy's share of the batch samples enough for the
// micro-batches (when fixed) of a size the model runs at (the profile's
// `sizes_left_out`), R > 1 only where the partitioner is not a hand split
// by layers (--partitioner layers, which runs on every device). Throws
// InputError for given replicas whose share cannot hold the given
// micro-batches.
std::vector<int> ReplicaCounts(int gpus, int replicas, const Profile& profile, const PlanRequest& request);

// How the copies of a pipeline meet, and how a copy's stages talk when
// there are several copies.
struct ReplicaLinks {
  Link allreduce;  // the gradients' ring among the copies
  // Between a copy's stages where the copies run as processes (mpexec runs
  // a plan with replicas over processes): CPU workers, which pass values
  // by reference as threads of one process, then pay the probed process
  // link. Empty: the devices' own links.
  std::optional<Link> boundary;
  // [R - 1]: the share of a step R copies add waiting for the latest of
  // them before each sum (Cluster::replica_wait_share); beyond its end: none.
  std::vector<double> wait_share;
};

// `devices` as R copies of a block of devices.size() / R: the plan lists
// every copy's devices, the cluster one copy's, whose gradients meet over
// `links.allreduce`.
PlanDevices ForReplicas(const PlanDevices& devices, int replicas, const ReplicaLinks& links);

struct ReplicaSearch {
  PlanDevices devices;        // the chosen R's (ForReplicas)
  SearchResult search;        // the chosen R's plan, and every R's alternatives (PlanCandidate::replicas)
  std::vector<int64_t> added;  // micro-batch sizes measured for the search (SearchAtMeasuredSizes)
  double measure_ms = 0;
};

// Searches every count of `counts` on ForReplicas(devices, R, links)
// (`measure`: SearchAtMeasuredSizes, else SearchPlan alone) and chooses as
// above. A count no plan fits is skipped; when none fits, the first
// count's PlanError is thrown.
ReplicaSearch SearchReplicas(ProfiledModel& profiled, const PlanDevices& devices, const std::vector<int>& counts,
                             const ReplicaLinks& links, const PlanRequest& request, bool measure);

}  // namespace mp
