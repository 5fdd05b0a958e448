// SearchPlan: the outer loop over (M, schedule, K). Per micro-batch size the
// order's costs are computed once; with identical devices one suffix DP
// table (BottleneckDp) answers every K, and when no device has a memory
// limit gpipe and 1f1b share it (only in-flight counts differ between them).
// Each partition is simulated; of the alternatives predicted within the
// tie window of the fastest, the simplest wins (Simpler).
#include "planner/partition/search.h"

#include <algorithm>
#include <map>

#include "common/byte_size.h"
#include "common/error.h"
#include "planner/partition/baselines.h"
#include "planner/partition/order.h"
#include "planner/partition/partition_dp.h"

namespace mp {
namespace {

std::vector<ScheduleKind> Schedules(const PlanRequest& request) {
  if (!request.schedule) {
    if (!request.training) return {ScheduleKind::kForwardOnly};
    return {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB};
  }
  if (IsTraining(*request.schedule) != request.training) {
    throw InputError(Concat("schedule ", ScheduleName(*request.schedule), " does not fit ",
                            request.training ? "training" : "inference", " (expected ",
                            request.training ? "gpipe or 1f1b" : "forward", ")"));
  }
  return {*request.schedule};
}

std::vector<int> Microbatches(const Profile& profile, const PlanRequest& request, int64_t batch) {
  if (request.microbatches == 0) {
    auto candidates = MicrobatchCandidates(profile, batch);
    if (candidates.empty()) {
      throw PlanError(Concat("no micro-batch count splits batch ", batch, " into a profiled size (",
                             profile.microbatch_sizes.empty() ? 0 : profile.microbatch_sizes.front(), " to ",
                             profile.microbatch_sizes.empty() ? 0 : profile.microbatch_sizes.back(), ")"));
    }
    return candidates;
  }
  const int m = request.microbatches;
  if (m < 1 || m > batch) {
    throw InputError(Concat("micro-batches: ", m, "; expected 1 to the batch, ", batch));
  }
  if (!MicrobatchesSplit(batch, m)) {
    int below = m, above = m;
    while (!MicrobatchesSplit(batch, below)) --below;
    while (!MicrobatchesSplit(batch, above)) ++above;
    throw InputError(Concat("micro-batches: ", m, " micro-batches of ", MicrobatchSize(batch, m), " samples leave the last of batch ",
                            batch, " empty; try ", below, " or ", above));
  }
  const int64_t size = MicrobatchSize(batch, m);
  if (!CanInterpolate(profile, size)) {
    throw PlanError(Concat(m, " micro-batches of batch ", batch, " are of size ", size,
                           ", outside the profiled sizes"));
  }
  return {m};
}

// Bounds for a baseline, or the DP's; throws PlanError when infeasible.
std::vector<int> MethodBounds(const std::string& method, const StageCostModel& model, const OpGraph& graph,
                              const std::vector<std::vector<std::string>>& groups) {
  if (method == "dp") return PartitionDp(model).bounds;
  if (method == "uniform") return UniformBounds(model);
  if (method == "params") return ParamBounds(model);
  if (method == "block") return BlockBounds(model);
  if (method == "layers") return LayerSplitBounds(graph, model.Costs().order, groups);
  throw InputError(Concat("partition method '", method, "': expected dp, uniform, params, block or layers"));
}

std::string MemoryProblem(const Partition& p) {
  for (const Stage& st : p.stages) {
    if (!st.fits) {
      return Concat(p.method, ": stage ", st.index, " needs ", FormatBytes(st.peak_memory_bytes), "; device ",
                    st.device, " has ", FormatBytes(st.memory_limit_bytes));
    }
  }
  return "";
}

// No schedule finishes a step before stage s has done M forwards and
// backwards, after micro-batch 0 has come through the stages before it and
// before its gradient has gone back through them.
double StepLowerBound(const Partition& p) {
  double fill = 0, bound = 0;
  for (size_t s = 0; s < p.stages.size(); ++s) {
    const Stage& st = p.stages[s];
    bound = std::max(bound, fill + p.microbatches * (st.forward_ms + st.backward_ms));
    fill += st.forward_ms + st.backward_ms;
    if (s < p.transfers.size()) fill += p.transfers[s].forward_ms + p.transfers[s].backward_ms;
  }
  return bound;
}

bool MemoryCanBind(const StageCostModel& model) {
  for (int s = 0; s < model.Stages(); ++s) {
    if (model.MemoryCanBind(s)) return true;
  }
  return false;
}

// A simulated alternative that may yet be chosen.
struct Candidate {
  int index = 0;  // into SearchResult::alternatives
  Partition partition;
  SimResult sim;
};

}  // namespace

bool Simpler(const PlanCandidate& a, const PlanCandidate& b, int64_t batch) {
  if (a.stages != b.stages) return a.stages < b.stages;
  const bool a_even = batch % a.microbatches == 0, b_even = batch % b.microbatches == 0;
  if (a_even != b_even) return a_even;
  if (a.microbatches != b.microbatches) return a.microbatches < b.microbatches;
  const bool a_1f1b = a.schedule == ScheduleKind::kOneFOneB, b_1f1b = b.schedule == ScheduleKind::kOneFOneB;
  if (a_1f1b != b_1f1b) return a_1f1b;
  return a.step_ms < b.step_ms;
}

std::vector<int> MicrobatchCandidates(const Profile& profile, int64_t batch) {
  std::vector<int> counts;
  int64_t last_size = -1;
  for (int64_t m = 1; m <= batch; ++m) {
    const int64_t size = MicrobatchSize(batch, int(m));
    if (size == last_size || !CanInterpolate(profile, size)) continue;
    last_size = size;
    counts.push_back(int(m));
  }
  return counts;
}

std::vector<double> SharedSlowdownFor(const Cluster& cluster, const Profile& profile, int64_t microbatch) {
  if (cluster.shared_slowdown.empty() || profile.shared_slowdown_sizes.empty()) return cluster.shared_slowdown;
  return SharedSlowdownAt(profile, microbatch);
}

// A noisy profile widens the tie window to at most this: past it, a
// simpler plan gives up too much predicted time (an MLP profile with a
// band of [-21%, +20%] chose 3 micro-batches, predicted 19% slower than
// the fastest).
constexpr double kMaxNoiseWindow = 0.10;

SearchResult SearchPlan(const OpGraph& graph, const Profile& profile, const Cluster& cluster,
                        const PlanRequest& request) {
  ValidateCluster(cluster);
  const int64_t global_batch = request.batch > 0 ? request.batch : profile.batch;
  if (global_batch < 1) throw InputError(Concat("batch ", global_batch, "; expected at least 1"));
  if (global_batch % cluster.replicas != 0) {
    throw InputError(Concat("batch ", global_batch, " does not split evenly into ", cluster.replicas,
                            " replicas; use a batch that is a multiple of ", cluster.replicas));
  }
  const int64_t batch = global_batch / cluster.replicas;  // each replica's pipeline runs its share
  if (request.training && !profile.training) {
    throw InputError("profile has no backward times; profile for training or plan inference");
  }
  const int devices = int(cluster.devices.size());
  if (request.stages < 0 || request.stages > devices) {
    throw InputError(Concat(request.stages, " stages requested for ", devices, " devices"));
  }
  std::vector<std::vector<std::string>> groups;
  int k_min = request.stages > 0 ? request.stages : 1;
  int k_max = request.stages > 0 ? request.stages : devices;
  if (request.method == "layers") {
    groups = ParseLayerSplit(request.layer_split);
    const int k = int(groups.size());
    if (k > devices || (request.stages > 0 && request.stages != k)) {
      throw InputError(Concat("layer split has ", k, " groups; expected ",
                              request.stages > 0 ? request.stages : devices, request.stages > 0 ? "" : " at most"));
    }
    k_min = k_max = k;
  }
  const auto schedules = Schedules(request);
  const auto counts = Microbatches(profile, request, batch);
  const auto order = PipelineOrder(graph);
  const bool shared_table = request.method == "dp" && IsHomogeneous(cluster);

  if (!(request.tie_tolerance >= 0 && request.tie_tolerance < 1)) {
    throw InputError(Concat("tie tolerance ", request.tie_tolerance, "; expected a fraction in [0, 1)"));
  }
  // Ties: predicted within [fastest, fastest * window]: the profile's
  // ranking band, up to kMaxNoiseWindow, or the tolerance if wider. A
  // profile without samples (a device profile's estimates) ties only
  // equal times.
  const Band ranking = RankingBand(profile);
  const Band band{1.0, ranking.Empty() ? 1.0
                                       : std::max(std::min(ranking.high, 1 + kMaxNoiseWindow), 1 + request.tie_tolerance)};
  SearchResult result;
  std::vector<Candidate> ties;  // simulated, within the tie window of the fastest so far
  double fastest_ms = 0;
  for (int M : counts) {
    const int64_t size = MicrobatchSize(batch, M);
    Cluster sized = cluster;
    sized.shared_slowdown = SharedSlowdownFor(cluster, profile, size);
    const OrderCosts costs = ComputeOrderCosts(graph, profile, order, size, request.training);
    const StageCostModel base(costs, StageSpecs(sized, schedules.front(), 1, M), request.optimizer_state_factor);
    const int k_top = std::min(k_max, request.stages > 0 ? k_max : std::max(1, base.UsefulNodes()));
    std::optional<BottleneckDp> table;
    std::optional<StageCostModel> table_model;
    for (ScheduleKind kind : schedules) {
      if (shared_table) {
        // Schedules differ only in memory; where it binds no stage, one table serves both.
        StageCostModel top = base.WithStages(StageSpecs(sized, kind, k_top, M));
        if (!table || MemoryCanBind(top) || MemoryCanBind(*table_model)) {
          table_model.emplace(std::move(top));
          table.emplace(*table_model);
        }
      }
      for (int K = k_top; K >= k_min; --K) {
        PlanCandidate alt;
        alt.stages = K;
        alt.microbatches = M;
        alt.microbatch_size = size;
        alt.schedule = kind;
        const StageCostModel model = base.WithStages(StageSpecs(sized, kind, K, M));
        try {
          std::vector<int> bounds;
          if (shared_table && K <= base.UsefulNodes()) {
            DpSolution s = table->Solve(K);
            bounds = s.feasible ? s.bounds : PartitionDp(model).bounds;  // PartitionDp says why not
          } else {
            bounds = MethodBounds(request.method, model, graph, groups);
          }
          Partition p = MakePartition(model, bounds, request.method, kind, M, false);
          alt.bottleneck_ms = p.bottleneck_ms;
          for (const Stage& st : p.stages) alt.peak_memory_bytes = std::max(alt.peak_memory_bytes, st.peak_memory_bytes);
          if (!p.fits) {
            alt.why_not = MemoryProblem(p);
          } else if (result.fastest >= 0 && (alt.step_ms = StepLowerBound(p)) > fastest_ms * band.high) {
            alt.feasible = true;
          } else {
            SimResult sim = SimulatePartition(p);
            alt.feasible = true;
            alt.simulated = true;
            alt.step_ms = sim.step_ms;
            alt.bubble_fraction = sim.bubble_fraction;
            const int index = int(result.alternatives.size());
            if (result.fastest < 0 || alt.step_ms < fastest_ms) {
              result.fastest = index;
              fastest_ms = alt.step_ms;
              ties.erase(std::remove_if(ties.begin(), ties.end(),
                                        [&](const Candidate& c) {
                                          return !Within(result.alternatives[c.index].step_ms, fastest_ms, band);
                                        }),
                         ties.end());
            }
            if (Within(alt.step_ms, fastest_ms, band)) {
              ListCutTensors(p, costs);
              ties.push_back({index, std::move(p), std::move(sim)});
            }
          }
        } catch (const PlanError& e) {
          alt.why_not = e.what();
        }
        result.alternatives.push_back(alt);
      }
    }
  }
  if (ties.empty()) {
    const PlanCandidate* closest = nullptr;
    for (const auto& alt : result.alternatives) {
      if (!closest || alt.stages > closest->stages) closest = &alt;
    }
    throw PlanError(Concat("no feasible plan among ", result.alternatives.size(), " alternatives; with ",
                           closest ? closest->stages : 0, " stages: ", closest ? closest->why_not : "none tried"));
  }
  auto chosen = ties.begin();
  for (auto c = ties.begin(); c != ties.end(); ++c) {
    result.alternatives[c->index].tie = ties.size() > 1;
    if (Simpler(result.alternatives[c->index], result.alternatives[chosen->index], batch)) chosen = c;
  }
  result.chosen = chosen->index;
  result.predicted = std::move(chosen->sim);
  result.partition = std::move(chosen->partition);
  result.schedule = BuildSchedule(result.partition.schedule, int(result.partition.stages.size()),
                                  result.partition.microbatches);
  return result;
}

}  // namespace mp
