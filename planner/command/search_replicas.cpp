// SearchReplicas: one pipeline search per replica count, then the choice
// among their plans.
#include "planner/command/search_replicas.h"

#include <optional>

#include "common/error.h"

namespace mp {

std::vector<int> ReplicaCounts(int gpus, int replicas, const Profile& profile, const PlanRequest& request) {
  // Each replica cuts its share of the batch into the micro-batches asked
  // for: `--gpus 4 --microbatches 32` of the MLP's 64 failed on R = 4
  // ("micro-batches: 32; expected 1 to the batch, 16") where R = 1 and 2
  // take them; and DeepLabV3's 8 samples in 4 micro-batches on 2 devices
  // failed as a whole where 2 replicas made them of 1 sample, which its
  // BatchNorm refuses, and 1 replica of 2 devices runs them.
  const int64_t batch = profile.batch;
  const int m = request.microbatches;
  const auto fails = [&](int r) { return m > 0 && batch / r >= m ? LeftOutSizeMet(profile, batch / r, m) : nullptr; };
  const auto holds = [&](int r) { return m <= 0 || (batch / r >= m && !fails(r)); };
  if (replicas > 0) {
    if (replicas > 1 && batch % replicas == 0 && !holds(replicas)) {
      const Profile::LeftOutSize* left = fails(replicas);
      throw InputError(Concat("--microbatches ", m, ": each of ", replicas, " replicas gets ", batch / replicas,
                              " samples of the batch (", batch, ")",
                              left ? Concat(", in micro-batches the model fails at (", left->size, "): ", left->why)
                                   : ""));
    }
    return {replicas};
  }
  std::vector<int> counts;
  for (int r = 1; r <= gpus; ++r) {
    if (r > 1 && request.method == "layers") break;  // a hand split runs on every device
    if (batch % r != 0 || gpus / r < std::max(1, request.stages) || (r > 1 && !holds(r))) continue;
    counts.push_back(r);
  }
  return counts;
}

PlanDevices ForReplicas(const PlanDevices& devices, int replicas, const ReplicaLinks& links) {
  if (replicas == 1) return devices;
  // Every device given stays in the plan's list (3 of them for 2 replicas
  // of 1: "uses 2 of 3"); the replicas take the first.
  PlanDevices out = devices;
  const size_t per_replica = devices.cluster.devices.size() / size_t(replicas);
  out.cluster.devices.resize(per_replica);
  out.cluster.replicas = replicas;
  out.cluster.replica_link = links.allreduce;
  if (size_t(replicas) <= links.wait_share.size()) out.cluster.replica_wait_share = links.wait_share[replicas - 1];
  if (links.boundary) {
    for (Link& link : out.cluster.links) link = *links.boundary;
  }
  return out;
}

namespace {

struct Searched {
  int replicas = 1;
  PlanDevices devices;
  MeasuredSearch measured;
  const PlanCandidate& Chosen() const { return measured.search.alternatives.at(measured.search.chosen); }
  // What its search chose by the tie rule alone, without the previous plan.
  const PlanCandidate& Fresh() const {
    const SearchResult& s = measured.search;
    return s.alternatives.at(s.fresh >= 0 ? s.fresh : s.chosen);
  }
  bool KeptPrevious() const { return measured.search.fresh >= 0; }
};

// The best RankMs of its search (its fastest step, by default).
double BestMs(const Searched& s, Objective objective) {
  return RankMs(s.measured.search.alternatives.at(s.measured.search.fastest), objective);
}


}  // namespace

ReplicaSearch SearchReplicas(ProfiledModel& profiled, const PlanDevices& devices, const std::vector<int>& counts,
                             const ReplicaLinks& links, const PlanRequest& request, bool measure) {
  std::vector<Searched> searched;
  std::optional<PlanError> first_error;
  SearchMemo memo;  // the counts share micro-batch sizes, and so order costs and DP tables
  for (int r : counts) {
    Searched s{r, ForReplicas(devices, r, links), {}};
    try {
      if (measure) {
        s.measured = SearchAtMeasuredSizes(profiled, s.devices.cluster, request, &memo);
      } else {
        s.measured.search = SearchPlan(profiled.graph, profiled.profile, s.devices.cluster, request, &memo);
      }
    } catch (const PlanError& e) {
      if (!first_error && searched.empty()) first_error = e;
      continue;
    }
    for (PlanCandidate& a : s.measured.search.alternatives) a.replicas = r;
    searched.push_back(std::move(s));
  }
  if (searched.empty()) throw *first_error;

  // Among the counts' own choices, as within one search: on equal devices,
  // fewer stages a replica, so more replicas (data parallelism first, a
  // pipeline only as deep as it must be, as Megatron-LM advises).
  const double window = TieWindow(profiled.profile, request);
  const double keep = std::max(window, 1 + request.device_tolerance);
  const Objective objective = request.objective;
  double fastest = BestMs(searched.front(), objective);
  for (const Searched& s : searched) fastest = std::min(fastest, BestMs(s, objective));
  // The previous plan's shape, kept by its count's search, must be kept
  // against the fastest of every count too (KeepsPrevious); where it is
  // not, that count searches again without it.
  for (Searched& s : searched) {
    // Its own search found no alternative of its size outclassing it.
    if (!s.KeptPrevious() ||
        KeepsPrevious(Ranked(s.Chosen(), objective), {}, fastest, window, 1 + request.tie_tolerance)) {
      continue;
    }
    PlanRequest fresh = request;
    fresh.previous.reset();
    s.measured.search = SearchPlan(profiled.graph, profiled.profile, s.devices.cluster, fresh, &memo);
    for (PlanCandidate& a : s.measured.search.alternatives) a.replicas = s.replicas;
  }
  std::vector<PlanCandidate> ranked;
  for (const Searched& s : searched) ranked.push_back(Ranked(s.Fresh(), objective));
  std::vector<const PlanCandidate*> choices;
  for (const PlanCandidate& r : ranked) choices.push_back(&r);
  const DeviceChoice choice = ChooseOnFewestDevices(
      choices, fastest, keep, window,
      [](const PlanCandidate& a, const PlanCandidate& b) { return a.replicas > b.replicas; });
  size_t chosen = choice.index;
  for (size_t i = 0; i < searched.size(); ++i) {
    if (searched[i].KeptPrevious()) chosen = i;
  }
  if (chosen != choice.index) {  // what the rule alone chose is another count's plan
    SearchResult& kept = searched[chosen].measured.search;
    kept.alternatives.at(kept.fresh).fresh = false;
    SearchResult& fresh = searched[choice.index].measured.search;
    fresh.alternatives.at(fresh.chosen).fresh = true;
  }

  ReplicaSearch result;
  result.devices = searched[chosen].devices;
  result.search = searched[chosen].measured.search;
  result.search.alternatives.clear();
  result.search.fresh = -1;
  for (size_t i = 0; i < searched.size(); ++i) {
    const SearchResult& s = searched[i].measured.search;
    const int offset = int(result.search.alternatives.size());
    if (i == chosen) result.search.chosen = offset + s.chosen;
    for (size_t j = 0; j < s.alternatives.size(); ++j) {
      if (s.alternatives[j].fresh) result.search.fresh = offset + int(j);
    }
    if (BestMs(searched[i], objective) == fastest) result.search.fastest = offset + s.fastest;
    result.search.alternatives.insert(result.search.alternatives.end(), s.alternatives.begin(), s.alternatives.end());
    // Another count's ties were ties with its own fastest, not with the
    // plan's (a 2-replica row at 1.37x the chosen step read "tie: within
    // the tie window of the fastest", and the report's "why" counted it).
    if (i != chosen) {
      for (size_t j = 0; j < s.alternatives.size(); ++j) result.search.alternatives[offset + j].tie = false;
    }
    // The counts' choices that tied with the chosen one.
    if (choice.ties > 1 && RankMs(searched[i].Chosen(), objective) <= choice.limit_ms) {
      result.search.alternatives[offset + s.chosen].tie = true;
    }
    result.added.insert(result.added.end(), searched[i].measured.added.begin(), searched[i].measured.added.end());
    result.measure_ms += searched[i].measured.measure_ms;
  }
  return result;
}

}  // namespace mp
