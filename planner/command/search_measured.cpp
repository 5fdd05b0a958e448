// SearchAtMeasuredSizes: search, measure what the answer interpolated,
// search again.
#include "planner/command/search_measured.h"

#include <algorithm>
#include <chrono>

#include "planner/profile/merge_sizes.h"

namespace mp {

std::vector<int64_t> UnmeasuredSizes(const SearchResult& search, const Profile& profile) {
  std::vector<int64_t> sizes;
  for (int index : {search.chosen, search.fastest}) {
    if (index < 0) continue;
    const int64_t m = search.alternatives.at(index).microbatch_size;
    const auto& measured = profile.microbatch_sizes;
    if (m > 0 && std::find(measured.begin(), measured.end(), m) == measured.end() &&
        std::find(sizes.begin(), sizes.end(), m) == sizes.end()) {
      sizes.push_back(m);
    }
  }
  return sizes;
}

MeasuredSearch SearchAtMeasuredSizes(ProfiledModel& profiled, const Cluster& cluster, const PlanRequest& request,
                                     SearchMemo* memo) {
  MeasuredSearch result;
  result.search = SearchPlan(profiled.graph, profiled.profile, cluster, request, memo);
  for (int round = 0; round < kMeasureRounds && profiled.measure_sizes; ++round) {
    const std::vector<int64_t> sizes = UnmeasuredSizes(result.search, profiled.profile);
    if (sizes.empty()) break;
    const auto start = std::chrono::steady_clock::now();
    // A size of the profile measured again beside them sets their pace to
    // the profile's (PaceToAnchor).
    const int64_t anchor = AnchorSize(profiled.profile, sizes.front());
    std::vector<int64_t> run = sizes;
    run.push_back(anchor);
    std::sort(run.begin(), run.end());
    Profile more = profiled.measure_sizes(run);
    const double pace = PaceToAnchor(more, profiled.profile, anchor);
    MergeSizes(profiled.profile, more);
    for (int64_t m : sizes) profiled.profile.paced_sizes.push_back({m, anchor, pace});
    if (memo) memo->Clear();  // its costs were the profile's before
    result.measure_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    result.added.insert(result.added.end(), sizes.begin(), sizes.end());
    result.search = SearchPlan(profiled.graph, profiled.profile, cluster, request, memo);
  }
  return result;
}

}  // namespace mp
