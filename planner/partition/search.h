// The plan search: over device counts K, micro-batch counts M and schedules
// (with their stages per device v: K·v stages), partition the pipeline
// order (with the DP or a baseline), simulate one step, and keep the
// fastest. The DP's cut is exact for the slowest stage, not for the step:
// each DP alternative that simulates within the tie window also simulates
// the baselines' cuts and keeps the fastest of them. Alternatives predicted
// within the tie window of the fastest (the request's tie tolerance, or the
// profile's ranking band, counted up to 10%, where wider: band.h) are ties,
// and the simplest of them is chosen (Simpler), so noise in the profile
// does not move the choice between plans it cannot tell apart; between
// alternatives of one micro-batch size only the tie tolerance counts
// (Outclassed).
// Every combination tried is kept, with its step time or why it is
// infeasible, for the report's table of alternatives. An alternative that
// cannot tie (its step-time lower bound, the fill time of its slowest stage
// plus M times that stage's work, is beyond the tie window) is not
// simulated; stage counts are tried from the most down, so good
// alternatives come early.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "planner/graph/op_graph.h"
#include "planner/partition/cluster.h"
#include "planner/partition/partition.h"
#include "planner/partition/search_memo.h"
#include "planner/plan/plan.h"
#include "planner/profile/profile.h"

namespace mp {

// The tie window's floor. Not 5%: on a balanced 2-stage pipeline the
// bubble alone makes M = 8 predict 5.2% slower than M = 16 (1/9 against
// 1/17 of the step), so a 5% window put the choice between them on its
// edge, and noise moved it (the MLP and GPT chose 8 in some profiles and 16
// in others). Doubling M from 16 gains 2.7% and from 8 5.2%: 4% lies
// between them with a margin either way.
constexpr double kDefaultTieTolerance = 0.04;

// Devices are not spent for nothing: a plan that uses more devices must be
// predicted faster than the fastest plan on fewer by more than this, on any
// profile (a device profile's estimates too, where only equal times tie).
// Issue 29: a 96-block transformer planned for 64 A100s took 32 stages for
// a step 0.8% faster than one device's.
constexpr double kDefaultDeviceTolerance = 0.02;

struct PlanRequest {
  bool training = true;
  int64_t batch = 0;                      // 0: the profile's batch
  int stages = 0;                         // devices the pipeline uses (K); 0: search 1..devices
  int microbatches = 0;                   // 0: search the profiled sizes
  // Unset (auto): in training every schedule (gpipe, 1f1b, zb-h1,
  // interleaved-1f1b, zbv), in inference forward.
  std::optional<ScheduleKind> schedule;
  int chunks = 0;                         // interleaved-1f1b's stages per device v; 0: 2
  std::string method = "dp";              // dp | uniform | params | block | layers
  // dp: also simulate the baselines' cuts of each alternative and keep the
  // fastest (the DP is exact for the slowest stage, not for the step).
  bool known_cuts = true;
  std::string layer_split;                // method layers: "layer1,layer2 | layer3,layer4,fc"
  // The plan's optimizer (Plan::optimizer): its state tensors per
  // parameter with a gradient (OptimizerStateTensors) are in the memory.
  std::string optimizer = "adam";
  // Training: which stages recompute their activations (--recompute); auto
  // recomputes a stage only where its range would not fit otherwise, so
  // without a memory limit it never does. always leaves zb-h1 and zbv out
  // (they keep each micro-batch's graph from I to W).
  Recompute recompute = Recompute::kNever;
  // With a measured profile, alternatives predicted within this fraction
  // of the fastest, or within the profile's ranking band if that is wider,
  // are ties (--tie-tolerance); otherwise only equal times tie.
  double tie_tolerance = kDefaultTieTolerance;
  // Alternatives on the fewest devices predicted within this fraction of
  // the fastest are preferred to it (--device-tolerance).
  double device_tolerance = kDefaultDeviceTolerance;
  // What the choice minimises (--objective): the step, or step x devices.
  // Under throughput per device the tie window and the device tolerance
  // apply to step x devices.
  Objective objective = Objective::kStep;
  // The shape of the plan this one replaces (mpplan --previous): its
  // replicas, stages, chunks, micro-batches and schedule, kept while it
  // stays a tie (KeepsPrevious). Each profile of one model on one machine
  // has its own noise, and where two alternatives sit at an edge of the
  // tie rule (the zoo ConvNet's zb-h1 predicted 3.9% faster than 1f1b at
  // 2 x 32 in one profile, 4.1% in the next: one side of the 4% tie
  // tolerance, then the other) the plan would move with it.
  std::optional<PlanCandidate> previous;
};


struct SearchResult {
  Partition partition;                    // the chosen alternative
  Schedule schedule;
  SimResult predicted;
  std::vector<PlanCandidate> alternatives;  // in the order tried
  int fastest = -1;                       // of the best feasible one by RankMs (the fastest, by default)
  int chosen = -1;                        // of the chosen one: the simplest tie
  int fresh = -1;                         // where the previous shape was kept: the simplest tie
};

// The previous plan's shape stays while `a`, the alternative of that shape,
// would still be a tie with a margin of one more tie tolerance (`same_size`
// = 1 + that): predicted within `window` x `same_size` of `fastest_ms`, and
// no alternative of its micro-batch size on as many devices faster by more
// than `same_size` squared. To move the plan, the profile's noise must
// shift a comparison by a whole tie tolerance, not just across the edge
// of the rule (the tie window, 4% within one size).
bool KeepsPrevious(const PlanCandidate& a, const std::vector<const PlanCandidate*>& alternatives, double fastest_ms,
                   double window, double same_size);

// The choice among simulated alternatives, the fastest of which takes
// `fastest_ms`: of those within `keep` of it (the wider of the tie window
// and the device tolerance), the fewest devices any uses; then, among the
// alternatives on those devices within `window` (the tie window) of their
// fastest, the first by `before`. `limit_ms`: the step time up to which
// alternatives tie with it; `ties`: how many do.
struct DeviceChoice {
  size_t index = 0;  // into the alternatives given
  double limit_ms = 0;
  int ties = 0;
};
DeviceChoice ChooseOnFewestDevices(const std::vector<const PlanCandidate*>& alternatives, double fastest_ms,
                                   double keep, double window,
                                   const std::function<bool(const PlanCandidate&, const PlanCandidate&)>& before);

// `a` is predicted slower, by more than the factor `same_size` (1 + the tie
// tolerance), than an alternative on as many devices with micro-batches of
// its size. It is no tie, however wide the tie window: the two run the same
// nodes at the same size, timed in the same passes of the profile, so a slow
// stretch of the machine while profiling moved both alike, and the noise
// that makes alternatives of other sizes ties (the ranking band) does not
// reorder them. (On the zoo GPT, zbv measured 12% faster than zb-h1 at 2 x 8
// samples, and was predicted 4.7-7.8% faster in three profiles; the 10%
// window made them ties, which went to zb-h1's fewer stages.)
bool Outclassed(const PlanCandidate& a, const std::vector<const PlanCandidate*>& alternatives, double same_size);

// Among alternatives that tie, a is simpler than b: fewer devices, then
// a shallower pipeline (stages per replica over chunks: interleaving adds
// none), then fewer stages
// recomputing (a forward more each; memory bought where it was not
// needed, within the noise of a plan that keeps), then micro-batches of
// equal size (they split `batch` evenly, as users split by hand; they are
// also few among the counts, so noise moves the choice less than between
// neighbouring ragged counts), then fewer micro-batches, then the faster
// schedule, and where two are predicted equal the order 1f1b (GPipe's time
// with fewer activations held), gpipe, interleaved-1f1b, zb-h1, zbv,
// dualpipev. Schedules at one micro-batch count run the same node times,
// so the ratio between them is what the prediction gets right (34 of 34
// within 10% of the measured one in every run of the schedules
// benchmark); until the thirty-sixth session the order above came first,
// and auto measured up to 10.6% slower than the best hand-picked schedule
// where it chose a simpler one predicted up to 4% slower (a tie).
bool Simpler(const PlanCandidate& a, const PlanCandidate& b, int64_t batch);


// The micro-batch counts worth trying for `batch`: for each micro-batch size
// m the profile can interpolate, the count M = ceil(batch / m) (ascending M,
// one per distinct size; the last micro-batch may be smaller, and is timed as
// a full one). None whose micro-batches, the last included, meet a size the
// profile left out (Profile::sizes_left_out) or fall below the profiled ones
// where it left any out.
std::vector<int> MicrobatchCandidates(const Profile& profile, int64_t batch);

// Where the profile left sizes out (the model fails at them), the one that
// `m` micro-batches of `batch` meet: their size, the last one's, or, for a
// last one below the profiled sizes, the first left out; else nullptr.
const Profile::LeftOutSize* LeftOutSizeMet(const Profile& profile, int64_t batch, int m);

// The tie window's upper end, as a ratio to the fastest: the profile's
// ranking band, up to 10%, or 1 + the tie tolerance if wider; a profile
// without samples (a device profile's estimates) ties only equal times
// (1). Throws InputError for a tolerance outside [0, 1).
double TieWindow(const Profile& profile, const PlanRequest& request);

// Runs the search for one replica's pipeline: with cluster.replicas R, each
// of R copies runs batch / R samples and the step includes each stage's
// gradient all-reduce. Throws InputError for a malformed request (a batch
// that R does not divide, a stage count
// above the devices, a schedule that does not match training/inference, a
// profile without backward times for training, a bad layer split) and
// PlanError when no alternative is feasible, with the reason of the one
// closest to fitting. `shared`, where given, keeps the order costs and DP
// tables for the next search of this graph and profile (another replica
// count's).
SearchResult SearchPlan(const OpGraph& graph, const Profile& profile, const Cluster& cluster,
                        const PlanRequest& request, SearchMemo* shared = nullptr);

// The cluster's contention factors (Cluster::shared_slowdown) for
// micro-batches of `microbatch` samples: CPU workers slow each other more
// at small sizes, so where the profile measured several sizes, the factors
// interpolated at this one (SharedSlowdownAt; for a cluster of replicas,
// which run as processes, the processes' rows where measured); else the
// cluster's own.
std::vector<double> SharedSlowdownFor(const Cluster& cluster, const Profile& profile, int64_t microbatch);

}  // namespace mp
