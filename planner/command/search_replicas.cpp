// SearchReplicas: one pipeline search per replica count, then the choice
// among their plans.
#include "planner/command/search_replicas.h"

#include <optional>

#include "common/error.h"

namespace mp {

std::vector<int> ReplicaCounts(int gpus, int replicas, int64_t batch, const PlanRequest& request) {
  if (replicas > 0) return {replicas};
  const bool plain = !request.schedule || *request.schedule == ScheduleKind::kGPipe ||
                     *request.schedule == ScheduleKind::kOneFOneB || *request.schedule == ScheduleKind::kForwardOnly;
  std::vector<int> counts;
  for (int r = 1; r <= gpus; ++r) {
    if (r > 1 && (!plain || request.method == "layers")) break;
    if (batch % r != 0 || gpus / r < std::max(1, request.stages)) continue;
    counts.push_back(r);
  }
  return counts;
}

PlanDevices ForReplicas(const PlanDevices& devices, int replicas, const Link& replica_link) {
  if (replicas == 1) return devices;
  PlanDevices out = devices;
  const size_t per_replica = devices.cluster.devices.size() / size_t(replicas);
  out.devices.resize(per_replica * size_t(replicas));
  out.cluster.devices.resize(per_replica);
  out.cluster.replicas = replicas;
  out.cluster.replica_link = replica_link;
  return out;
}

namespace {

struct Searched {
  int replicas = 1;
  PlanDevices devices;
  MeasuredSearch measured;
  const PlanCandidate& Chosen() const { return measured.search.alternatives.at(measured.search.chosen); }
};

}  // namespace

ReplicaSearch SearchReplicas(ProfiledModel& profiled, const PlanDevices& devices, const std::vector<int>& counts,
                             const Link& replica_link, const PlanRequest& request, bool measure) {
  std::vector<Searched> searched;
  std::optional<PlanError> first_error;
  for (int r : counts) {
    Searched s{r, ForReplicas(devices, r, replica_link), {}};
    try {
      if (measure) {
        s.measured = SearchAtMeasuredSizes(profiled, s.devices.cluster, request);
      } else {
        s.measured.search = SearchPlan(profiled.graph, profiled.profile, s.devices.cluster, request);
      }
    } catch (const PlanError& e) {
      if (!first_error && searched.empty()) first_error = e;
      continue;
    }
    for (PlanCandidate& a : s.measured.search.alternatives) a.replicas = r;
    searched.push_back(std::move(s));
  }
  if (searched.empty()) throw *first_error;

  // Among the counts' own choices, as within one search (fewer replicas
  // first where devices are equal).
  const double window = TieWindow(profiled.profile, request);
  const double keep = std::max(window, 1 + request.device_tolerance);
  double fastest = searched.front().measured.search.alternatives.at(searched.front().measured.search.fastest).step_ms;
  std::vector<const PlanCandidate*> choices;
  for (const Searched& s : searched) {
    fastest = std::min(fastest, s.measured.search.alternatives.at(s.measured.search.fastest).step_ms);
    choices.push_back(&s.Chosen());
  }
  const DeviceChoice choice = ChooseOnFewestDevices(
      choices, fastest, keep, window,
      [](const PlanCandidate& a, const PlanCandidate& b) { return a.replicas < b.replicas; });
  const size_t chosen = choice.index;

  ReplicaSearch result;
  result.devices = searched[chosen].devices;
  result.search = searched[chosen].measured.search;
  result.search.alternatives.clear();
  for (size_t i = 0; i < searched.size(); ++i) {
    const SearchResult& s = searched[i].measured.search;
    const int offset = int(result.search.alternatives.size());
    if (i == chosen) result.search.chosen = offset + s.chosen;
    if (s.alternatives.at(s.fastest).step_ms == fastest) result.search.fastest = offset + s.fastest;
    result.search.alternatives.insert(result.search.alternatives.end(), s.alternatives.begin(), s.alternatives.end());
    // The counts' choices that tied with the chosen one.
    if (choice.ties > 1 && searched[i].Chosen().step_ms <= choice.limit_ms) {
      result.search.alternatives[offset + s.chosen].tie = true;
    }
    result.added.insert(result.added.end(), searched[i].measured.added.begin(), searched[i].measured.added.end());
    result.measure_ms += searched[i].measured.measure_ms;
  }
  return result;
}

}  // namespace mp
