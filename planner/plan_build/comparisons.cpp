// Each comparison is one SearchPlan call with K, M and the schedule fixed,
// so a baseline is costed and simulated exactly like the chosen plan, each
// partitioner with its own cut. A row
// that cannot be planned (too little memory, a split with more groups than
// devices) is kept with the reason, since that is itself an answer.
#include "planner/plan_build/comparisons.h"

#include <algorithm>

#include "common/error.h"
#include "planner/partition/baselines.h"

namespace mp {
namespace {

PlanCandidate Compare(const OpGraph& graph, const Profile& profile, const Cluster& cluster, PlanRequest request,
                       const std::string& method, int stages, int chunks, int microbatches, ScheduleKind schedule) {
  request.method = method;
  request.known_cuts = false;  // each partitioner's own cut
  request.stages = stages / chunks;  // devices
  request.chunks = schedule == ScheduleKind::kInterleaved1F1B ? chunks : 0;
  request.microbatches = microbatches;
  request.schedule = schedule;
  PlanCandidate row;
  row.method = method;
  if (method == "layers") row.split = request.layer_split;
  row.stages = stages;
  row.chunks = chunks;
  row.microbatches = microbatches;
  const int64_t batch = request.batch > 0 ? request.batch : profile.batch;
  row.microbatch_size = MicrobatchSize(batch / cluster.replicas, microbatches);  // a replica's share
  row.schedule = schedule;
  try {
    const SearchResult result = SearchPlan(graph, profile, cluster, request);
    row.feasible = true;
    row.step_ms = result.predicted.step_ms;
    row.bottleneck_ms = result.partition.bottleneck_ms;
    row.bubble_fraction = result.predicted.bubble_fraction;
  } catch (const Error& e) {
    row.why_not = e.what();
  }
  return row;
}

}  // namespace

std::vector<PlanCandidate> ComparePartitioners(const OpGraph& graph, const Profile& profile, const Cluster& cluster,
                                                const Cluster& whole, const PlanRequest& request, const Plan& chosen) {
  std::vector<PlanCandidate> rows;
  const int K = int(chosen.stages.size());
  const int chunks = StagesPerDevice(chosen);
  if (K > 1) {
    for (const char* method : {"dp", "uniform", "params", "block"}) {
      // The DP's own cut is a comparison where the plan kept a baseline's.
      if (method == chosen.partitioner && chosen.cut.empty()) continue;
      rows.push_back(
          Compare(graph, profile, cluster, request, method, K, chunks, chosen.microbatches, chosen.schedule));
    }
  }
  if (request.layer_split.empty()) return rows;
  const int split_stages = int(ParseLayerSplit(request.layer_split).size());
  std::vector<int> counts;  // the chosen plan's M (a copy's, with replicas: not the split's) and every size's
  if (chosen.replicas == 1) counts.push_back(chosen.microbatches);
  for (int64_t size = 1; size <= chosen.batch; ++size) {
    if (chosen.batch % size == 0 && CanInterpolate(profile, size)) counts.push_back(int(chosen.batch / size));
  }
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  // A layer split runs one stage per device: after a plan of several, the
  // same schedule on one (interleaved-1f1b's is 1f1b, zbv's and dualpipev's zb-h1).
  const ScheduleKind schedule = chosen.schedule == ScheduleKind::kInterleaved1F1B ? ScheduleKind::kOneFOneB
                                : IsV(chosen.schedule)                          ? ScheduleKind::kZeroBubbleH1
                                                                                   : chosen.schedule;
  for (int m : counts) {
    if (chosen.partitioner == "layers" && m == chosen.microbatches && split_stages == K) continue;
    rows.push_back(Compare(graph, profile, whole, request, "layers", split_stages, 1, m, schedule));
  }
  return rows;
}

}  // namespace mp
