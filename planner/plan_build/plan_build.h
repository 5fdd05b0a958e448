// From the search's result to a Plan: node ranges, layer names, parameter
// counts, the tensors each stage sends and receives with their shapes at the
// micro-batch size, per-stage predictions, the one-device reference and the
// warnings a user needs before running it.
#pragma once

#include <string>
#include <vector>

#include "planner/graph/op_graph.h"
#include "planner/partition/cluster.h"
#include "planner/partition/search.h"
#include "planner/plan/plan.h"
#include "planner/profile/profile.h"

namespace mp {

// What the plan records besides the search: where the model is (relative to
// the plan), its hash, the devices as the executor will address them, and
// where the profile came from.
struct PlanSource {
  std::string model_path;           // as written into the plan
  std::string model_sha256;
  std::vector<PlanDevice> devices;  // one per cluster device and replica (replica r: the r-th block)
  std::string profile_file;         // --profile-in, or ""
  std::string calibration;
};

Plan BuildPlan(const OpGraph& graph, const Profile& profile, const Cluster& cluster, const PlanRequest& request,
               const SearchResult& result, const PlanSource& source);

// Layer names a stage covers, in pipeline order: a top-level module when the
// stage has all of it (layer1), else its children (layer3.0, layer3.1).
std::vector<std::string> StageLayers(const OpGraph& graph, const std::vector<int>& stage_nodes);

// The step time of the whole batch on one device of `cluster` (K = 1, M = 1,
// no memory limit), or 0 when the profile does not cover the full batch.
double OneDeviceStepMs(const OpGraph& graph, const Profile& profile, const Cluster& cluster,
                       const PlanRequest& request);

}  // namespace mp
