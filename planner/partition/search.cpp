// SearchPlan: the outer loop over (M, schedule, K). Per micro-batch size the
// order's costs are computed once; with identical devices one suffix DP
// table (BottleneckDp) answers every K, and when no device has a memory
// limit gpipe and 1f1b share it (only in-flight counts differ between them).
// Each partition is simulated; of the alternatives predicted within the
// tie window of the fastest, the simplest wins (Simpler), but for one
// predicted slower by more than the tie tolerance than another of its
// micro-batch size (Outclassed).
#include "planner/partition/search.h"

#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>

#include "common/byte_size.h"
#include "common/error.h"
#include "planner/partition/baselines.h"
#include "planner/partition/order.h"
#include "planner/partition/partition_dp.h"

namespace mp {
namespace {

// A schedule to try, with its stages per device.
struct ScheduleChoice {
  ScheduleKind kind;
  int chunks;
};

std::vector<ScheduleChoice> Schedules(const PlanRequest& request) {
  if (request.chunks > 0 && request.schedule && *request.schedule != ScheduleKind::kInterleaved1F1B) {
    throw InputError(Concat("chunks: ", ScheduleName(*request.schedule), " runs ", ChunksFor(*request.schedule, 0),
                            " stages per device; only interleaved-1f1b takes a number"));
  }
  // A layer split fixes the stages, one per device.
  const bool layers = request.method == "layers";
  if (layers && request.schedule && ChunksFor(*request.schedule, request.chunks) > 1) {
    throw InputError(Concat(ScheduleName(*request.schedule),
                            " cuts several stages per device: it plans with dp, uniform, params or block, not a layer split"));
  }
  const bool always = request.training && request.recompute == Recompute::kAlways;
  if (!request.schedule) {
    if (!request.training) return {{ScheduleKind::kForwardOnly, 1}};
    std::vector<ScheduleChoice> all = {{ScheduleKind::kGPipe, 1}, {ScheduleKind::kOneFOneB, 1}};
    if (!always) all.push_back({ScheduleKind::kZeroBubbleH1, 1});
    if (layers) return all;
    all.push_back({ScheduleKind::kInterleaved1F1B, ChunksFor(ScheduleKind::kInterleaved1F1B, request.chunks)});
    if (!always) all.push_back({ScheduleKind::kZeroBubbleV, 2});
    if (!always) all.push_back({ScheduleKind::kDualPipeV, 2});
    return all;
  }
  if (always && SplitsBackward(*request.schedule)) {
    throw InputError(Concat("recompute always: ", ScheduleName(*request.schedule),
                            " keeps each micro-batch's graph from I to W; recomputation is planned with gpipe, 1f1b "
                            "and interleaved-1f1b"));
  }
  if (IsTraining(*request.schedule) != request.training) {
    throw InputError(Concat("schedule ", ScheduleName(*request.schedule), " does not fit ",
                            request.training ? "training" : "inference", " (expected ",
                            request.training ? TrainingScheduleNames() : "forward", ")"));
  }
  return {{*request.schedule, ChunksFor(*request.schedule, request.chunks)}};
}

// Why the search does not try `choice` on K devices with M micro-batches,
// or "".
std::string NotTried(const ScheduleChoice& choice, int K, int M, const Cluster& cluster, int useful_nodes) {
  if (std::string why = ScheduleRuledOut(choice.kind, K, M, choice.chunks); !why.empty()) return why;
  if (choice.chunks == 1) return "";
  if (choice.kind == ScheduleKind::kInterleaved1F1B && !IsHomogeneous(cluster)) {
    return "interleaved-1f1b needs identical devices and links (its last stage sends to the first device)";
  }
  if (K * choice.chunks > useful_nodes) {
    return Concat(K * choice.chunks, " stages for ", useful_nodes, " nodes that compute");
  }
  return "";
}

int ScheduleRank(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kOneFOneB: return 0;
    case ScheduleKind::kGPipe: return 1;
    case ScheduleKind::kInterleaved1F1B: return 2;
    case ScheduleKind::kZeroBubbleH1: return 3;
    case ScheduleKind::kZeroBubbleV: return 4;
    case ScheduleKind::kDualPipeV: return 5;
    default: return 6;
  }
}

// `batch`: a replica's, of `replicas`.
std::vector<int> Microbatches(const Profile& profile, const PlanRequest& request, int64_t batch, int replicas) {
  if (request.microbatches == 0) {
    auto candidates = MicrobatchCandidates(profile, batch);
    if (candidates.empty()) {
      const auto& left = profile.sizes_left_out;
      throw PlanError(Concat("no micro-batch count splits batch ", batch,
                             replicas > 1 ? Concat(" (", batch * replicas, " over ", replicas, " replicas)") : "",
                             " into a profiled size (",
                             profile.microbatch_sizes.empty() ? 0 : profile.microbatch_sizes.front(), " to ",
                             profile.microbatch_sizes.empty() ? 0 : profile.microbatch_sizes.back(), ")",
                             left.empty() ? "" : Concat("; the model fails at ", left.front().size, ": ",
                                                        left.front().why)));
    }
    return candidates;
  }
  const int m = request.microbatches;
  if (m < 1 || m > batch) {
    throw InputError(Concat("--microbatches ", m, ": expected 1 to the batch (", batch, ")"));
  }
  if (!MicrobatchesSplit(batch, m)) {
    int below = m, above = m;
    while (!MicrobatchesSplit(batch, below)) --below;
    while (!MicrobatchesSplit(batch, above)) ++above;
    throw InputError(Concat("--microbatches ", m, ": ", m, " micro-batches of ", MicrobatchSize(batch, m),
                            " samples leave the last of batch ", batch, " empty; try ", below, " or ", above));
  }
  const int64_t size = MicrobatchSize(batch, m);
  if (const Profile::LeftOutSize* left = LeftOutSizeMet(profile, batch, m)) {
    const int64_t last = LastMicrobatchSize(batch, m);
    throw InputError(Concat("--microbatches ", m, ": ",
                            last < profile.microbatch_sizes.front()
                                ? Concat("a micro-batch of ", last, " sample", last == 1 ? "" : "s",
                                         ", below the profiled sizes (", SizeList(profile.microbatch_sizes), ")")
                                : Concat(size == left->size ? "micro-batches" : "a last one",
                                         " of ", left->size, " samples"),
                            "; the model fails at ", left->size, ": ", left->why));
  }
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
                    st.device, " has ", FormatBytes(st.memory_limit_bytes), " for it");
    }
  }
  return "";
}

// No schedule finishes a step before stage s has done M forwards and
// backwards, after micro-batch 0 has come through the stages before it and
// (unless W may come last: zb-h1) before its gradient has gone back
// through them; nor before each device has done its stages' work.
double StepLowerBound(const Partition& p) {
  const bool w_last = SplitsBackward(p.schedule);
  double forward_fill = 0, backward_fill = 0, bound = 0;
  std::vector<double> device_work(p.stages.size() / p.chunks, 0);
  for (size_t s = 0; s < p.stages.size(); ++s) {
    const Stage& st = p.stages[s];
    // Split schedules run I and W, which can add up to less than B; a
    // recomputing stage's B runs its forward first.
    const double backward = w_last && !st.whole_backward ? st.input_backward_ms + st.weight_backward_ms
                                                         : st.backward_ms + st.recompute_ms;
    const double work = p.microbatches * (st.forward_ms + backward);
    bound = std::max(bound, forward_fill + work + (w_last ? 0 : backward_fill));
    device_work[st.device] += work;
    forward_fill += st.forward_ms;
    backward_fill += st.backward_ms + st.recompute_ms;
    if (s < p.transfers.size()) forward_fill += p.transfers[s].forward_ms, backward_fill += p.transfers[s].backward_ms;
  }
  // The replicas' wait is a share of the step: of the bound too.
  return std::max(bound, *std::max_element(device_work.begin(), device_work.end())) * (1 + p.replica_wait_share) +
         p.step_overhead_ms;
}

// The step's times only (PartitionStepTimes, on the shape's lists from
// `memo`): the search compares steps, and the plan it chooses is simulated
// whole once, at the end (SearchPlan). Where the step can only be taken
// below `than_ms` (a cut against the one it has), its replay gives up once
// it surely is not (step_ms infinity).
SimResult StepTimes(const Partition& p, SearchMemo& memo,
                    double than_ms = std::numeric_limits<double>::infinity()) {
  const auto lists = memo.ListsOf(p.schedule, int(p.stages.size()) / p.chunks, p.microbatches, p.chunks);
  return PartitionStepTimes(p, lists->schedule, lists->order, than_ms);
}

// The step another cut must be under to replace one of `ms`.
double Faster(double ms) { return ms * (1 - 1e-9); }

// The DP minimises the slowest stage's cost; the simulated step also
// counts the fill and drain, so a baseline's cut with the same or a
// slightly worse slowest stage can simulate faster (torchgpipe's block
// partition did, by 0.6%, on a DenseNet-121 at 4 stages). The baselines'
// cuts of `dp`'s model that fit and differ from its cut, each with its
// method as `cut`; the params cut from `memo`'s table of `top` stages or
// more.
std::vector<Partition> KnownCuts(const StageCostModel& model, const OpGraph& graph, const Partition& dp,
                                 SearchMemo& memo, int top) {
  std::vector<Partition> cuts;
  for (const std::string method : {"block", "params", "uniform"}) {
    std::vector<int> bounds;
    if (method == "params") {
      if (model.UsefulNodes() >= model.Stages()) {
        bounds = memo.Params(model, std::max(top, model.Stages())).Solve(model.Stages()).bounds;
      }
    } else {
      try {
        bounds = MethodBounds(method, model, graph, {});
      } catch (const PlanError&) {
        continue;
      }
    }
    if (bounds.empty()) continue;
    if (bounds == dp.bounds) continue;
    if (std::any_of(cuts.begin(), cuts.end(), [&](const Partition& c) { return c.bounds == bounds; })) continue;
    Partition other = MakePartition(model, bounds, dp.method, dp.schedule, dp.microbatches, false, dp.chunks);
    if (!other.fits) continue;
    other.cut = method;
    cuts.push_back(std::move(other));
  }
  return cuts;
}

// Where the request takes them (the dp method, more than one stage), the
// known cuts of `p`'s model (KnownCuts, the params table of `top` stages or
// more): the fastest of `p` and them is kept in `p` (the DP's on a tie),
// each simulated where its bound allows, and `took` says whether it was
// one of them. Returns the others for a split schedule's
// ChooseWholeBackward, none for the rest.
std::vector<Partition> TakeKnownCuts(const PlanRequest& request, const StageCostModel& model, const OpGraph& graph,
                                     Partition& p, SimResult& sim, SearchMemo& memo, int top, bool* took = nullptr) {
  if (request.method != "dp" || !request.known_cuts || p.stages.size() < 2) return {};
  std::vector<Partition> cuts = KnownCuts(model, graph, p, memo, top);
  for (Partition& c : cuts) {
    if (StepLowerBound(c) >= sim.step_ms) continue;  // cannot be faster
    SimResult c_sim = StepTimes(c, memo, Faster(sim.step_ms));
    if (c_sim.step_ms < Faster(sim.step_ms)) {
      std::swap(p, c);
      sim = std::move(c_sim);
      if (took) *took = true;
    }
  }
  if (!SplitsBackward(p.schedule)) cuts.clear();
  return cuts;
}

// The cut's neighbours: each boundary moved one position earlier or later
// (a node that takes no time, a view or a list, changes what crosses the
// boundary), or over the next node that takes time. While one of them fits
// and simulates faster than `p` (at most kRefineRounds times), the fastest
// replaces it, and `p.cut` says "neighbour" (or "block+neighbour" when it
// started from that baseline's cut). The DP's cut minimises the slowest
// stage; the step also pays the fill, the drain and each boundary's
// transfers, which a boundary a few nodes away can shorten at the same or
// a slightly slower bottleneck (A100 estimates: 0.2-3% on ResNet-50, GPT
// and MobileNet). Up to kRefineStages stages: each round simulates up to
// four neighbours a boundary. True when it moved a boundary.
constexpr int kRefineRounds = 64;
constexpr size_t kRefineStages = 16;

bool RefineCut(const StageCostModel& model, Partition& p, SimResult& sim, SearchMemo& memo) {
  if (p.stages.size() < 2 || p.stages.size() > kRefineStages) return false;
  bool moved = false;
  for (int round = 0; round < kRefineRounds; ++round) {
    std::optional<Partition> best;
    SimResult best_sim;
    for (size_t i = 1; i + 1 < p.bounds.size(); ++i) {
      const int lo = p.bounds[i - 1], b = p.bounds[i], hi = p.bounds[i + 1];
      int earlier = b - 1;  // the last start whose [start, b) holds a node that takes time
      while (earlier > lo && model.FirstUsefulEnd(earlier) > b) --earlier;
      const int later = b < hi ? model.FirstUsefulEnd(b) : hi;  // past the next such node
      // One position either way too: a node that takes no time (a view, a
      // list) changes what crosses the boundary.
      const int moves[] = {b - 1, b + 1, earlier, later};
      for (int k = 0; k < 4; ++k) {
        const int to = moves[k];
        if (k >= 2 && to == moves[k - 2]) continue;  // tried
        // Both stages it divides keep a node that takes time.
        if (to <= lo || to >= hi || model.FirstUsefulEnd(lo) > to || model.FirstUsefulEnd(to) > hi) continue;
        Partition other = MoveBound(model, p, i, to);
        const double limit = best ? best_sim.step_ms : sim.step_ms;
        if (!other.fits || StepLowerBound(other) >= limit) continue;
        SimResult other_sim = StepTimes(other, memo, Faster(limit));
        if (other_sim.step_ms < Faster(limit)) {
          best = std::move(other);
          best_sim = std::move(other_sim);
        }
      }
    }
    if (!best) break;
    moved = true;
    best->cut = p.cut.empty() || p.cut == "neighbour" ? "neighbour" : p.cut.substr(0, p.cut.find('+')) + "+neighbour";
    p = std::move(*best);
    sim = std::move(best_sim);
  }
  return moved;
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
  // Its stage cost model and the order costs it points at, for RefineCut.
  std::shared_ptr<const OrderCosts> costs;
  std::optional<StageCostModel> model;
  // A split schedule's other known cuts (the DP's among them where a
  // baseline's was kept), for ChooseWholeBackward.
  std::vector<Partition> others;
  // Whether the known cuts were tried (an alternative that may tie), and
  // the params table's stages to try them with later (KnownCuts).
  bool cuts_tried = false;
  int cuts_top = 0;
};

// A zero-bubble schedule splits every stage's backward, and W fills the
// bubbles; but where a stage's I + W costs more than its B (a stage whose
// B is under a millisecond or two pays a fixed 0.02-0.3 ms: a second
// engine call, each weight node entered twice; bench_split), the split may
// not pay for itself. Each such stage in turn runs B instead (and no W)
// where the step then simulates faster. On the chosen plan only, as
// RefineCut (which then keeps these stages' choice): it changes no plan's
// rank by more than that gain.
bool ChooseWholeBackward(Partition& p, SimResult& sim, SearchMemo& memo) {
  if (!SplitsBackward(p.schedule)) return false;
  bool changed = false;
  for (size_t s = 0; s < p.stages.size(); ++s) {
    const Stage& st = p.stages[s];
    if (st.input_backward_ms + st.weight_backward_ms <= st.backward_ms) continue;
    Partition other = p;
    RunWhole(other, s);
    SimResult other_sim = StepTimes(other, memo, Faster(sim.step_ms));
    if (other_sim.step_ms < Faster(sim.step_ms)) {
      p = std::move(other);
      sim = std::move(other_sim);
      changed = true;
    }
  }
  return changed;
}

// The DP's best few for a candidate: each known cut's stages run B where
// that is faster (ChooseWholeBackward; running B on some stages can gain
// more on another known cut than on the one kept: a profile of branchy at
// 4 stages of zb-h1, a baseline's cut kept for its faster split step, 27.6
// ms once refined, where the DP's cut ran 19.9 with B on some stages), the
// fastest kept, and its cut's neighbours (RefineCut). Whether it changed.
bool Refine(Candidate& c, const PlanRequest& request, SearchMemo& memo) {
  bool changed = ChooseWholeBackward(c.partition, c.sim, memo);
  for (Partition& other : c.others) {
    SimResult other_sim = StepTimes(other, memo);
    ChooseWholeBackward(other, other_sim, memo);
    if (other_sim.step_ms < c.sim.step_ms * (1 - 1e-9)) {
      c.partition = std::move(other);
      c.sim = std::move(other_sim);
      changed = true;
    }
  }
  return (request.method == "dp" && request.known_cuts && RefineCut(*c.model, c.partition, c.sim, memo)) || changed;
}

// What the alternative's row says of the partition it kept.
void Describe(PlanCandidate& alt, const Partition& kept) {
  alt.bottleneck_ms = kept.bottleneck_ms;
  alt.peak_memory_bytes = 0;
  alt.recomputing = 0;
  for (const Stage& st : kept.stages) {
    alt.peak_memory_bytes = std::max(alt.peak_memory_bytes, st.peak_memory_bytes);
    alt.recomputing += st.recompute;
  }
}

}  // namespace

bool Simpler(const PlanCandidate& a, const PlanCandidate& b, int64_t batch) {
  if (Devices(a) != Devices(b)) return Devices(a) < Devices(b);
  const int a_depth = a.stages / std::max(1, a.chunks), b_depth = b.stages / std::max(1, b.chunks);
  if (a_depth != b_depth) return a_depth < b_depth;
  if (a.recomputing != b.recomputing) return a.recomputing < b.recomputing;
  const bool a_even = batch % a.microbatches == 0, b_even = batch % b.microbatches == 0;
  if (a_even != b_even) return a_even;
  if (a.microbatches != b.microbatches) return a.microbatches < b.microbatches;
  const bool equal = std::abs(a.step_ms - b.step_ms) <= 1e-9 * std::max(a.step_ms, b.step_ms);
  if (a.schedule != b.schedule && equal) return ScheduleRank(a.schedule) < ScheduleRank(b.schedule);
  return a.step_ms < b.step_ms;
}

const Profile::LeftOutSize* LeftOutSizeMet(const Profile& profile, int64_t batch, int m) {
  if (profile.sizes_left_out.empty()) return nullptr;
  const int64_t size = MicrobatchSize(batch, m), last = LastMicrobatchSize(batch, m);
  for (const Profile::LeftOutSize& left : profile.sizes_left_out) {
    if (left.size == size || left.size == last) return &left;
  }
  return last < profile.microbatch_sizes.front() ? &profile.sizes_left_out.front() : nullptr;
}

std::vector<int> MicrobatchCandidates(const Profile& profile, int64_t batch) {
  std::vector<int> counts;
  int64_t last_size = -1;
  for (int64_t m = 1; m <= batch; ++m) {
    const int64_t size = MicrobatchSize(batch, int(m));
    if (size == last_size || !CanInterpolate(profile, size)) continue;
    if (LeftOutSizeMet(profile, batch, int(m))) continue;  // the last, shorter micro-batch too
    last_size = size;
    counts.push_back(int(m));
  }
  return counts;
}

std::vector<double> SharedSlowdownFor(const Cluster& cluster, const Profile& profile, int64_t microbatch) {
  if (cluster.shared_slowdown.empty() || profile.shared_slowdown_sizes.empty()) return cluster.shared_slowdown;
  return SharedSlowdownAt(profile, microbatch, cluster.replicas > 1);  // replicas run as processes
}

DeviceChoice ChooseOnFewestDevices(const std::vector<const PlanCandidate*>& alternatives, double fastest_ms,
                                   double keep, double window,
                                   const std::function<bool(const PlanCandidate&, const PlanCandidate&)>& before) {
  int fewest = 0;
  for (const PlanCandidate* a : alternatives) {
    if (a->step_ms <= fastest_ms * keep && (fewest == 0 || Devices(*a) < fewest)) fewest = Devices(*a);
  }
  double fastest_on_fewest = 0;
  for (const PlanCandidate* a : alternatives) {
    if (Devices(*a) == fewest && a->step_ms <= fastest_ms * keep &&
        (fastest_on_fewest == 0 || a->step_ms < fastest_on_fewest)) {
      fastest_on_fewest = a->step_ms;
    }
  }
  DeviceChoice choice;
  choice.limit_ms = fastest_on_fewest * window;
  bool found = false;
  for (size_t i = 0; i < alternatives.size(); ++i) {
    const PlanCandidate& a = *alternatives[i];
    if (a.step_ms > choice.limit_ms) continue;
    ++choice.ties;
    if (Devices(a) == fewest && (!found || before(a, *alternatives[choice.index]))) choice.index = i, found = true;
  }
  return choice;
}

bool Outclassed(const PlanCandidate& a, const std::vector<const PlanCandidate*>& alternatives, double same_size) {
  for (const PlanCandidate* b : alternatives) {
    if (b->microbatch_size == a.microbatch_size && Devices(*b) == Devices(a) && a.step_ms > b->step_ms * same_size) {
      return true;
    }
  }
  return false;
}

bool KeepsPrevious(const PlanCandidate& a, const std::vector<const PlanCandidate*>& alternatives, double fastest_ms,
                   double window, double same_size) {
  return a.previous && a.step_ms <= fastest_ms * window * same_size &&
         !Outclassed(a, alternatives, same_size * same_size);
}

namespace {

bool SameShape(const PlanCandidate& a, const PlanCandidate& b) {
  return a.stages == b.stages && a.chunks == b.chunks && a.microbatches == b.microbatches && a.schedule == b.schedule;
}

// The alternative to plan among `kept` (simulated, predicted within `keep`
// of the best RankMs): ChooseOnFewestDevices, Simpler first, among those not
// Outclassed by more than `same_size`. Where the tie window is the wider,
// that is the simplest tie, as before the device tolerance. Marks the ties:
// every alternative it chose among within the limit, when there are several.
// The previous plan's shape instead where KeepsPrevious; `fresh` is then
// the index into `alternatives` of the one it would have chosen.
Candidate& Choose(std::vector<PlanCandidate>& alternatives, std::vector<Candidate>& kept, const Band& band,
                  const Band& keep, double same_size, int64_t batch, Objective objective, int& fresh) {
  // Compared by RankMs: copies whose step is their rank under `objective`.
  std::vector<PlanCandidate> ranked;
  for (const Candidate& c : kept) ranked.push_back(Ranked(alternatives[c.index], objective));
  std::vector<const PlanCandidate*> all;
  for (const PlanCandidate& r : ranked) all.push_back(&r);
  std::vector<const PlanCandidate*> among;
  std::vector<size_t> at;  // into kept
  double fastest = 0;
  for (size_t i = 0; i < kept.size(); ++i) {
    if (Outclassed(*all[i], all, same_size)) continue;
    among.push_back(all[i]);
    at.push_back(i);
    if (fastest == 0 || all[i]->step_ms < fastest) fastest = all[i]->step_ms;
  }
  const DeviceChoice choice =
      ChooseOnFewestDevices(among, fastest, keep.high, band.high,
                            [batch](const PlanCandidate& a, const PlanCandidate& b) { return Simpler(a, b, batch); });
  for (const Candidate& c : kept) alternatives[c.index].tie = false;
  for (size_t j = 0; j < among.size(); ++j) {
    alternatives[kept[at[j]].index].tie = choice.ties > 1 && among[j]->step_ms <= choice.limit_ms;
  }
  Candidate& chosen = kept[at[choice.index]];
  for (size_t i = 0; i < kept.size(); ++i) {
    if (&kept[i] == &chosen || !KeepsPrevious(*all[i], all, fastest, band.high, same_size)) continue;
    fresh = chosen.index;
    alternatives[chosen.index].fresh = true;
    return kept[i];
  }
  return chosen;
}

}  // namespace

// A noisy profile widens the tie window to at most this: past it, a
// simpler plan gives up too much predicted time (an MLP profile with a
// band of [-21%, +20%] chose 3 micro-batches, predicted 19% slower than
// the fastest).
constexpr double kMaxNoiseWindow = 0.10;

double TieWindow(const Profile& profile, const PlanRequest& request) {
  if (!(request.tie_tolerance >= 0 && request.tie_tolerance < 1)) {
    throw InputError(Concat("tie tolerance ", request.tie_tolerance, "; expected a fraction in [0, 1)"));
  }
  if (!(request.device_tolerance >= 0 && request.device_tolerance < 1)) {
    throw InputError(Concat("device tolerance ", request.device_tolerance, "; expected a fraction in [0, 1)"));
  }
  const Band ranking = RankingBand(profile);
  if (ranking.Empty()) return 1.0;
  return std::max(std::min(ranking.high, 1 + kMaxNoiseWindow), 1 + request.tie_tolerance);
}

namespace {

// More than the DP's best few (Refine) have gained on a cut, RefineCut's
// moves and ChooseWholeBackward's stages: 7.2% on the MLP's dualpipev (A100
// estimates, M = 8: 1.75 ms unrefined, 1.62 searched alone).
constexpr double kRefineGain = 0.10;

// With the schedule left to the search: every other schedule it takes,
// searched alone at the chosen plan's devices and micro-batch count as
// --schedule would search it, and taken where predicted faster. The ties
// are chosen by their unrefined steps and only the chosen one is refined
// (Refine), where a schedule searched alone is refined too: unrefined,
// auto's interleaved-1f1b on the zoo GPT (M = 2) lost to zbv by 0.8%, and
// searched alone it was 1.3% faster; on A100 estimates the MLP's dualpipev
// (M = 8) searched alone was 2.4% faster than auto's interleaved-1f1b. So
// auto never predicts slower than a schedule named for its shape. Only the
// schedules whose unrefined step (or lower bound) is within kRefineGain of
// the chosen one's: refining gains less than that.
void FasterScheduleOfShape(const OpGraph& graph, const Profile& profile, const Cluster& cluster,
                           const PlanRequest& request, SearchMemo& memo, SearchResult& result) {
  const PlanCandidate chosen = result.alternatives.at(result.chosen);
  const auto close = [&](ScheduleKind kind) {
    for (const PlanCandidate& a : result.alternatives) {
      if (a.schedule == kind && a.feasible && a.microbatches == chosen.microbatches &&
          Devices(a) == Devices(chosen) && a.step_ms <= chosen.step_ms * (1 + kRefineGain)) {
        return true;
      }
    }
    return false;
  };
  for (const ScheduleChoice& choice : Schedules(request)) {
    if (choice.kind == chosen.schedule || !close(choice.kind)) continue;
    PlanRequest alone = request;
    alone.schedule = choice.kind;
    alone.chunks = choice.kind == ScheduleKind::kInterleaved1F1B ? request.chunks : 0;
    alone.stages = chosen.stages / std::max(1, chosen.chunks);
    alone.microbatches = chosen.microbatches;
    alone.previous.reset();
    SearchResult found;
    try {
      found = SearchPlan(graph, profile, cluster, alone, &memo);
    } catch (const PlanError&) {
      continue;  // ruled out or infeasible at this shape
    }
    const PlanCandidate& best = found.alternatives.at(found.chosen);
    const PlanCandidate& now = result.alternatives.at(result.chosen);
    if (RankMs(best, request.objective) >= RankMs(now, request.objective) * (1 - 1e-9)) continue;
    for (size_t i = 0; i < result.alternatives.size(); ++i) {
      PlanCandidate& alt = result.alternatives[i];
      if (!SameShape(alt, best)) continue;
      const bool tie = alt.tie || now.tie, previous = alt.previous;
      alt = best;
      alt.tie = tie;
      alt.previous = previous;
      result.chosen = int(i);
      if (RankMs(alt, request.objective) < RankMs(result.alternatives.at(result.fastest), request.objective)) {
        result.fastest = int(i);
      }
      result.predicted = std::move(found.predicted);
      result.partition = std::move(found.partition);
      result.schedule = std::move(found.schedule);
      break;
    }
  }
}

// What a micro-batch count's search works on (SearchPlan).
struct SizeSetUp {
  int64_t size = 0;  // the micro-batch's samples
  Cluster sized;     // the cluster, with its slowdown at that size
  std::shared_ptr<const OrderCosts> costs;
  StageCostModel base;  // one stage on one device: the sums every model shares
  int k_top = 0;        // the most devices to try
  int table_top = 0;    // the most stages a shared table cuts
};

}  // namespace

SearchResult SearchPlan(const OpGraph& graph, const Profile& profile, const Cluster& cluster,
                        const PlanRequest& request, SearchMemo* shared) {
  ValidateCluster(cluster);
  SearchMemo own;
  SearchMemo& memo = shared ? *shared : own;
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
  const auto counts = Microbatches(profile, request, batch, cluster.replicas);
  const std::vector<int>& order = memo.Order(graph);
  const bool shared_table = request.method == "dp" && IsHomogeneous(cluster);

  const Band band{1.0, TieWindow(profile, request)};
  // What is simulated and kept: the tie window, or the device tolerance's
  // if wider (Choose picks among them).
  const Band keep{1.0, std::max(band.high, 1 + request.device_tolerance)};
  // The previous plan's shape is kept, and simulated, one tie tolerance
  // further out (KeepsPrevious).
  const bool previous = request.previous && request.previous->replicas == cluster.replicas;
  const Band keep_previous{1.0, keep.high * (1 + request.tie_tolerance)};
  const auto keep_for = [&](const PlanCandidate& a) { return a.previous ? keep_previous : keep; };
  SearchResult result;
  std::vector<Candidate> ties;  // simulated, within the keep window of the fastest so far
  std::set<size_t> ruled_out;   // alternatives a schedule's own rule excludes
  // The best RankMs so far (the fastest step under the default objective).
  double fastest_ms = 0;
  // A step's factor under the objective (RankFactor), for steps not yet
  // the alternative's (its lower bound, its simulation).
  const auto per = [&](const PlanCandidate& a) { return RankFactor(a, request.objective); };
  int most_chunks = 1;
  for (const ScheduleChoice& c : schedules) most_chunks = std::max(most_chunks, c.chunks);
  const auto set_up = [&](int M) {
    const int64_t size = MicrobatchSize(batch, M);
    Cluster sized = cluster;
    sized.shared_slowdown = SharedSlowdownFor(cluster, profile, size);
    auto costs = memo.Costs(graph, profile, order, size, request.training);
    // One stage on one device: the order's sums, shared by every model below.
    const ScheduleKind one_stage = request.training ? ScheduleKind::kOneFOneB : ScheduleKind::kForwardOnly;
    StageCostModel base =
        memo.Model(*costs, StageSpecs(sized, one_stage, 1, M), OptimizerStateTensors(request.optimizer));
    const int k_top = std::min(k_max, request.stages > 0 ? k_max : std::max(1, base.UsefulNodes()));
    // Where memory cannot bind, one table of identical stages, every
    // boundary charged the cluster's link, serves every K and schedule
    // (SearchMemo): exact for gpipe, 1f1b, zb-h1 and interleaved-1f1b; for
    // zbv it charges the middle boundary, which stays on one device, as a
    // link (the partition and the simulation that follow charge nothing).
    // A DP per K made zbv cost 30x the search on a 10,000-node chain.
    // Built once, with the most stages any schedule cuts.
    const int table_top = std::min(k_top * most_chunks, base.UsefulNodes());
    return SizeSetUp{size, std::move(sized), std::move(costs), std::move(base), k_top, table_top};
  };
  // The next count's, set up a count ahead so that its tables are built
  // on another core meanwhile (SearchMemo::Prefetch).
  std::optional<SizeSetUp> next;
  for (size_t count = 0; count < counts.size(); ++count) {
    const int M = counts[count];
    const SizeSetUp now = next ? std::move(*next) : set_up(M);
    next.reset();
    if (shared_table && count + 1 < counts.size()) next = set_up(counts[count + 1]);
    const int64_t size = now.size;
    const Cluster& sized = now.sized;
    // Shared: the ties keep it for RefineCut after the count's search.
    const auto& shared_costs = now.costs;
    const StageCostModel& base = now.base;
    const int k_top = now.k_top;
    const int table_top = now.table_top;
    std::set<ScheduleKind> prefetched;
    // Where memory binds: with identical devices, gpipe's and 1f1b's
    // in-flight counts depend only on the stages left, so one table per
    // schedule serves every K.
    std::optional<BottleneckDp> table;
    std::optional<StageCostModel> table_model;
    for (const auto& [kind, chunks] : schedules) {
      table.reset();
      if (shared_table && chunks == 1) {
        StageCostModel top = base.WithStages(StageSpecs(sized, kind, k_top, M, 1, request.recompute));
        if (MemoryCanBind(top)) {
          table_model.emplace(std::move(top));
          table.emplace(*table_model);
        }
      }
      for (int K = k_top; K >= k_min; --K) {
        PlanCandidate alt;
        alt.stages = K * chunks;
        alt.chunks = chunks;
        alt.microbatches = M;
        alt.microbatch_size = size;
        alt.schedule = kind;
        alt.previous = previous && SameShape(alt, *request.previous);
        if (std::string why = NotTried({kind, chunks}, K, M, sized, base.UsefulNodes()); !why.empty()) {
          // Listed where the user asked for this schedule, or where the
          // schedule's own rule (M divisible by K) excludes it; more stages
          // than nodes, or one device, are no alternative to list.
          const bool rule = K > 1 && K * chunks <= base.UsefulNodes();
          if (schedules.size() == 1 || rule) {
            alt.why_not = why;
            ruled_out.insert(result.alternatives.size());
            result.alternatives.push_back(alt);
          }
          continue;
        }
        try {
          const StageCostModel model =
              base.WithStages(StageSpecs(sized, kind, K * chunks, M, chunks, request.recompute));
          std::vector<int> bounds;
          if (shared_table && !MemoryCanBind(model) && K * chunks <= table_top) {
            StageSpec spec = model.Spec(0);
            spec.in_link = spec.out_link = LinkAt(sized, 0);
            // The next count's table alike: the same devices, links and
            // recomputation (what a table's times read besides the costs).
            if (next && prefetched.insert(kind).second) memo.Prefetch(next->base, spec, next->table_top);
            DpSolution s = memo.Table(base, spec, table_top).Solve(K * chunks);
            bounds = s.feasible ? s.bounds : PartitionDp(model).bounds;  // PartitionDp says why not
          } else if (table && K <= base.UsefulNodes()) {
            DpSolution s = table->Solve(K);
            bounds = s.feasible ? s.bounds : PartitionDp(model).bounds;
          } else {
            bounds = MethodBounds(request.method, model, graph, groups);
          }
          Partition p = MakePartition(model, bounds, request.method, kind, M, false, chunks);
          Describe(alt, p);
          if (!p.fits) {
            alt.why_not = MemoryProblem(p);
          } else if (result.fastest >= 0 &&
                     (alt.step_ms = StepLowerBound(p)) * per(alt) > fastest_ms * keep_for(alt).high) {
            // Pruned by the DP cut's bound (making the baselines' cuts to
            // bound them too cost 18x the search on a 10,000-node chain).
            alt.feasible = true;
          } else {
            SimResult sim = StepTimes(p, memo);
            // The baselines' cuts, for an alternative that may tie: for
            // every simulated one they cost 5x the search on a
            // 10,000-node chain, and for every one within the device
            // tolerance 2.4x on a 96-block transformer for 64 devices
            // (2.5 s against 1.1).
            const bool may_tie = result.fastest < 0 || sim.step_ms * per(alt) <= fastest_ms * band.high *
                                                                      (alt.previous ? 1 + request.tie_tolerance : 1);
            std::vector<Partition> cuts;
            if (may_tie) cuts = TakeKnownCuts(request, model, graph, p, sim, memo, table_top);
            if (!p.cut.empty()) Describe(alt, p);
            alt.feasible = true;
            alt.simulated = true;
            alt.step_ms = sim.step_ms;
            alt.bubble_fraction = sim.bubble_fraction;
            const int index = int(result.alternatives.size());
            if (result.fastest < 0 || RankMs(alt, request.objective) < fastest_ms) {
              result.fastest = index;
              fastest_ms = RankMs(alt, request.objective);
              ties.erase(std::remove_if(ties.begin(), ties.end(),
                                        [&](const Candidate& c) {
                                          const PlanCandidate& a = result.alternatives[c.index];
                                          return !Within(RankMs(a, request.objective), fastest_ms, keep_for(a));
                                        }),
                         ties.end());
            }
            if (Within(RankMs(alt, request.objective), fastest_ms, keep_for(alt))) {
              ties.push_back({index, std::move(p), std::move(sim), shared_costs, model, std::move(cuts), may_tie,
                              table_top});
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
    // The reason to give: a partition that failed before one a schedule's
    // rule excluded; then the most devices, one stage each before
    // interleaved chunks (whose smallest limit is for a chunk's share:
    // ResNet-50's 4 stages on 2 devices named 2.9 GiB where 2 stages fit
    // 203 MiB), then the most micro-batches and 1F1B (the least held at
    // once).
    const PlanCandidate* closest = nullptr;
    bool closest_ruled = true;
    const auto key = [](const PlanCandidate& c) {
      return std::make_tuple(c.stages / std::max(1, c.chunks), -c.chunks, c.microbatches,
                             c.schedule == ScheduleKind::kOneFOneB);
    };
    for (size_t i = 0; i < result.alternatives.size(); ++i) {
      const PlanCandidate& alt = result.alternatives[i];
      const bool ruled = ruled_out.count(i) > 0;
      if (!closest || (closest_ruled && !ruled) || (ruled == closest_ruled && key(alt) > key(*closest))) {
        closest = &alt;
        closest_ruled = ruled;
      }
    }
    throw PlanError(Concat("no feasible plan among ", result.alternatives.size(), " alternatives; with ",
                           closest ? closest->stages : 0, " stages: ", closest ? closest->why_not : "none tried"));
  }
  Candidate& chosen = Choose(result.alternatives, ties, band, keep, 1 + request.tie_tolerance, batch,
                             request.objective, result.fresh);
  // The DP's best few, for the shape chosen: its cut's neighbours
  // (RefineCut). Only there: refined among the ties, a tie's gain (a few
  // tenths of a percent, up to 3%) moved the choice between shapes that a
  // noisy profile ranks alike, and cost 1.3x the search on a 1,000-node DAG.
  // So the ties (and, where the previous shape is kept, the fresh choice)
  // are marked by their unrefined steps, and the chosen one may end up
  // faster than that by the gain. The chosen one also gets the known cuts
  // where it did not (chosen on fewer devices from outside the tie window).
  // Without them the zoo GPT on 8 A100s planned 1.516 ms where its shape
  // named (--replicas 2 --stages 3 --schedule zb-h1) planned 1.512, and
  // the 96-block GPT on 64 planned zbv where zb-h1 was faster; a second
  // mpplan, given the first plan as --previous, took the faster one.
  bool took_cut = false;
  if (!chosen.cuts_tried) {
    chosen.others =
        TakeKnownCuts(request, *chosen.model, graph, chosen.partition, chosen.sim, memo, chosen.cuts_top, &took_cut);
  }
  if (Refine(chosen, request, memo) || took_cut) {
    PlanCandidate& alt = result.alternatives[chosen.index];
    Describe(alt, chosen.partition);
    alt.step_ms = chosen.sim.step_ms;
    alt.bubble_fraction = chosen.sim.bubble_fraction;
    if (RankMs(alt, request.objective) < fastest_ms) result.fastest = chosen.index;
  }
  // Its stages' nodes and the tensors each cut carries, for the chosen one
  // only: listing the tensors for every tie (each cut scanning every live
  // value) was a fifth of the search of a 10,000-node chain over 64 devices.
  ListStages(chosen.partition, *chosen.costs);
  result.chosen = chosen.index;
  result.partition = std::move(chosen.partition);
  result.schedule = PartitionSchedule(result.partition);
  result.predicted = SimulatePartition(result.partition, result.schedule);  // memory and timeline too
  if (!request.schedule && result.fresh < 0) FasterScheduleOfShape(graph, profile, cluster, request, memo, result);
  return result;
}

}  // namespace mp
