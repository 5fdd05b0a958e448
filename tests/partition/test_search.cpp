// The search over stages, micro-batches and schedules: picks the fastest,
// keeps the alternatives, says when pipelining does not pay, and rejects
// malformed requests.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>

#include "common/error.h"
#include "planner/partition/order.h"
#include "planner/partition/partition_dp.h"
#include "planner/partition/search.h"
#include "planner/partition/search_memo.h"
#include "tests/partition/synthetic.h"

using mp::InputError;
using mp::ScheduleKind;

namespace {

const std::vector<int64_t> kSizes = {1, 2, 4, 8, 16, 32};

mp::testing::GraphBuilder EvenChain(int n, int64_t bytes_per_sample) {
  return mp::testing::Chain(std::vector<double>(n, 1.0), bytes_per_sample, 1000, kSizes);
}

// An alternative the search might have simulated: `stages` stages, `chunks`
// of them per device, `batch` in `microbatches`, predicted at `step_ms`.
mp::PlanCandidate Alternative(int stages, int chunks, int microbatches, int64_t batch, ScheduleKind schedule,
                              double step_ms) {
  mp::PlanCandidate a;
  a.stages = stages;
  a.chunks = chunks;
  a.microbatches = microbatches;
  a.microbatch_size = mp::MicrobatchSize(batch, microbatches);
  a.schedule = schedule;
  a.step_ms = step_ms;
  return a;
}

}  // namespace

TEST_CASE("every alternative pays the runtime's fixed cost per step at its worker count") {
  auto b = EvenChain(8, 1);
  mp::PlanRequest request;
  request.batch = 32;
  request.microbatches = 4;
  request.schedule = ScheduleKind::kOneFOneB;
  mp::Cluster cluster = mp::UniformCluster(2, {});
  for (int stages : {1, 2}) {
    request.stages = stages;
    const double free = mp::SearchPlan(b.graph, b.profile, cluster, request).predicted.step_ms;
    cluster.step_overhead_ms = {0.25, 0.5};
    const auto paid = mp::SearchPlan(b.graph, b.profile, cluster, request);
    cluster.step_overhead_ms.clear();
    CHECK(paid.predicted.step_ms == doctest::Approx(free + (stages == 1 ? 0.25 : 0.5)));
    CHECK(paid.partition.step_overhead_ms == (stages == 1 ? 0.25 : 0.5));
    CHECK(mp::SimulatePartition(paid.partition).step_ms == doctest::Approx(paid.predicted.step_ms));
  }
  cluster.step_overhead_ms = {-1};
  CHECK_THROWS_WITH_AS(mp::SearchPlan(b.graph, b.profile, cluster, request),
                       doctest::Contains("step_overhead_ms[0]: -1"), InputError);
}

TEST_CASE("micro-batch candidates are the profiled sizes") {
  auto b = EvenChain(4, 1);
  CHECK(mp::MicrobatchCandidates(b.profile, 32) == std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 11, 16, 32});
  b.profile.microbatch_sizes = {8, 16};
  for (auto& n : b.profile.nodes) {
    n.forward_ms = {1, 1};
    n.backward_ms = {1, 1};
  }
  CHECK(mp::MicrobatchCandidates(b.profile, 32) == std::vector<int>{2, 3, 4});
}

TEST_CASE("no micro-batch count meets a size the model fails at, and --microbatches there says so") {
  auto b = EvenChain(4, 1);
  b.profile.sizes_left_out = {{3, "ValueError: not at 3"}};  // 11 micro-batches of 32: ten of 3, one of 2
  CHECK(mp::MicrobatchCandidates(b.profile, 32) == std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 16, 32});
  mp::PlanRequest request;
  request.microbatches = 11;
  request.batch = 32;
  const auto cluster = mp::UniformCluster(2, {"gpu", 80ll << 30, 1.0}, {25e9, 0.01});
  CHECK_THROWS_WITH_AS(mp::SearchPlan(b.graph, b.profile, cluster, request),
                       "--microbatches 11: micro-batches of 3 samples; the model fails at 3: ValueError: not at 3",
                       InputError);
  // Left out below the profiled sizes: a last micro-batch there is refused too.
  b.profile.sizes_left_out = {{2, "ValueError: not at 2"}};  // 6 micro-batches of 32: five of 6, one of 2
  request.microbatches = 6;
  CHECK_THROWS_WITH_AS(mp::SearchPlan(b.graph, b.profile, cluster, request),
                       "--microbatches 6: a last one of 2 samples; the model fails at 2: ValueError: not at 2",
                       InputError);
  b.profile.microbatch_sizes = {2, 4, 8, 16, 32};
  b.profile.sizes_left_out = {{1, "ValueError: not at 1"}};
  CHECK(mp::MicrobatchCandidates(b.profile, 7) == std::vector<int>{1, 2});  // 3 of 7: 3, 3, 1; 4: 2, 2, 2, 1
}

TEST_CASE("among ties, fewer stages win, then micro-batches that split the batch evenly, then fewer") {
  const auto alt = [](int stages, int microbatches, ScheduleKind schedule, double step_ms) {
    return Alternative(stages, 1, microbatches, 256, schedule, step_ms);
  };
  const auto ragged = alt(2, 13, ScheduleKind::kOneFOneB, 858);  // 12 of 20 and one of 16
  const auto even = alt(2, 16, ScheduleKind::kOneFOneB, 836);
  CHECK(mp::Simpler(even, ragged, 256));
  CHECK_FALSE(mp::Simpler(ragged, even, 256));
  CHECK(mp::Simpler(alt(2, 8, ScheduleKind::kOneFOneB, 877), even, 256));  // both even: fewer
  CHECK(mp::Simpler(alt(1, 13, ScheduleKind::kGPipe, 900), even, 256));    // fewer stages first
  CHECK(mp::Simpler(alt(2, 16, ScheduleKind::kOneFOneB, 836), alt(2, 16, ScheduleKind::kGPipe, 836), 256));
  // At a batch they both split evenly, fewer micro-batches win again.
  CHECK(mp::Simpler(alt(2, 13, ScheduleKind::kOneFOneB, 858), alt(2, 16, ScheduleKind::kOneFOneB, 836), 208));
}

TEST_CASE("among ties, fewer devices win before fewer stages, then the faster schedule, then 1f1b, gpipe, interleaved") {
  const auto alt = [](int stages, int chunks, ScheduleKind schedule, double step_ms = 100) {
    return Alternative(stages, chunks, 4, 64, schedule, step_ms);  // 4 x 16
  };
  // 4 stages on 2 devices against 3 on 3: the fewer devices, however slower.
  CHECK(mp::Simpler(alt(4, 2, ScheduleKind::kInterleaved1F1B, 103), alt(3, 1, ScheduleKind::kOneFOneB), 64));
  // Interleaving's chunks are no deeper a pipeline: 4 stages on 2 devices
  // tie with zb-h1's 2 on the stages a replica, and the schedule decides:
  // the faster, however little (the same node times: their ratio is what
  // the prediction gets right), or where equal the order.
  CHECK(mp::Simpler(alt(4, 2, ScheduleKind::kInterleaved1F1B), alt(2, 1, ScheduleKind::kZeroBubbleH1), 64));
  CHECK(mp::Simpler(alt(2, 1, ScheduleKind::kZeroBubbleH1, 99.9), alt(4, 2, ScheduleKind::kInterleaved1F1B), 64));
  CHECK(mp::Simpler(alt(2, 1, ScheduleKind::kOneFOneB), alt(4, 2, ScheduleKind::kInterleaved1F1B), 64));
  CHECK(mp::Simpler(alt(4, 2, ScheduleKind::kDualPipeV, 96.5), alt(2, 1, ScheduleKind::kOneFOneB), 64));
  CHECK(mp::Simpler(alt(2, 1, ScheduleKind::kZeroBubbleH1), alt(4, 2, ScheduleKind::kZeroBubbleV), 64));
  const ScheduleKind order[] = {ScheduleKind::kOneFOneB, ScheduleKind::kGPipe, ScheduleKind::kZeroBubbleH1};
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) CHECK(mp::Simpler(alt(2, 1, order[i]), alt(2, 1, order[j]), 64) == (i < j));
  }
  // Fewer micro-batches still come before the faster schedule.
  CHECK(mp::Simpler(Alternative(2, 1, 2, 64, ScheduleKind::kOneFOneB, 103),
                    Alternative(4, 2, 4, 64, ScheduleKind::kZeroBubbleV, 100), 64));
}

TEST_CASE("between micro-batches of one size only the tie tolerance makes a tie, however wide the window") {
  // The zoo GPT's third profile (batch 16): zbv 4.7% faster than zb-h1 at 2 x 8.
  const auto zbv = Alternative(4, 2, 2, 16, ScheduleKind::kZeroBubbleV, 110.3);
  const auto zbh1 = Alternative(2, 1, 2, 16, ScheduleKind::kZeroBubbleH1, 115.8);
  const auto other_size = Alternative(2, 1, 4, 16, ScheduleKind::kZeroBubbleH1, 121.0);  // 4 x 4: 9.7% slower
  const auto on_one_device = Alternative(1, 1, 2, 16, ScheduleKind::kOneFOneB, 120.0);
  const std::vector<const mp::PlanCandidate*> all = {&zbv, &zbh1, &other_size, &on_one_device};
  CHECK(mp::Simpler(zbv, zbh1, 16));  // a tie would go to zbv, the faster (to zb-h1 before the thirty-sixth session)
  CHECK(mp::Outclassed(zbh1, all, 1.04));
  CHECK_FALSE(mp::Outclassed(zbh1, all, 1.05));
  CHECK_FALSE(mp::Outclassed(zbv, all, 1.0));
  CHECK_FALSE(mp::Outclassed(other_size, all, 1.04));     // another size: the window decides
  CHECK_FALSE(mp::Outclassed(on_one_device, all, 1.04));  // fewer devices: the device tolerance decides
}

TEST_CASE("the previous plan's shape stays while it would tie with one more tie tolerance to spare") {
  // The zoo ConvNet's profiles at 2 x 32: zb-h1 3.9% then 4.1% slower than
  // zbv, one side of the 4% tie tolerance and then the other.
  auto zbv = Alternative(4, 2, 2, 64, ScheduleKind::kZeroBubbleV, 100.0);
  auto zbh1 = Alternative(2, 1, 2, 64, ScheduleKind::kZeroBubbleH1, 104.1);
  auto other_size = Alternative(2, 1, 4, 64, ScheduleKind::kOneFOneB, 110.0);
  const std::vector<const mp::PlanCandidate*> all = {&zbv, &zbh1, &other_size};
  CHECK(mp::Outclassed(zbh1, all, 1.04));  // afresh, no tie: zbv is chosen
  CHECK_FALSE(mp::KeepsPrevious(zbh1, all, 100.0, 1.04, 1.04));  // not the previous plan's
  zbh1.previous = true;
  CHECK(mp::KeepsPrevious(zbh1, all, 100.0, 1.04, 1.04));  // as the previous plan's, kept
  zbh1.step_ms = 108.1;  // up to 1.04 squared
  CHECK(mp::KeepsPrevious(zbh1, all, 100.0, 1.04, 1.04));
  zbh1.step_ms = 108.3;
  CHECK_FALSE(mp::KeepsPrevious(zbh1, all, 100.0, 1.04, 1.04));
  // Another size: within the tie window times one more tolerance.
  other_size.previous = true;
  CHECK(mp::KeepsPrevious(other_size, all, 100.0, 1.06, 1.04));  // 10% against 1.06 x 1.04 = 10.2%
  CHECK_FALSE(mp::KeepsPrevious(other_size, all, 100.0, 1.05, 1.04));
}

TEST_CASE("the search keeps the previous plan's shape where it ties, says what it would choose afresh, and not else") {
  // 8 even nodes, 2 devices: afresh, the simplest tie.
  auto g = EvenChain(8, 100);
  mp::Profile profile = g.profile;
  profile.pass_band = {0.94, 1.06};  // one pass: a tie window of 6%
  profile.repeats = 1;
  const mp::Cluster cluster = mp::UniformCluster(2, mp::Device{});
  mp::PlanRequest request;
  const mp::SearchResult fresh = mp::SearchPlan(g.graph, profile, cluster, request);
  const mp::PlanCandidate& f = fresh.alternatives.at(fresh.chosen);
  CHECK(fresh.fresh == -1);
  // Another simulated alternative that ties with the fastest becomes the plan when it was the previous one.
  const mp::PlanCandidate& fastest = fresh.alternatives.at(fresh.fastest);
  const mp::PlanCandidate* other = nullptr;
  for (const mp::PlanCandidate& a : fresh.alternatives) {
    if (a.simulated && &a != &f && a.step_ms <= fastest.step_ms * 1.04 &&
        (a.microbatch_size != f.microbatch_size || a.step_ms <= f.step_ms * 1.04)) {
      other = &a;
    }
  }
  REQUIRE(other != nullptr);
  request.previous = *other;
  const mp::SearchResult kept = mp::SearchPlan(g.graph, profile, cluster, request);
  const mp::PlanCandidate& k = kept.alternatives.at(kept.chosen);
  CHECK(k.previous);
  CHECK(k.stages == other->stages);
  CHECK(k.microbatches == other->microbatches);
  CHECK(k.schedule == other->schedule);
  CHECK(int(kept.partition.stages.size()) == other->stages);
  CHECK(kept.partition.microbatches == other->microbatches);
  REQUIRE(kept.fresh >= 0);
  CHECK(kept.alternatives.at(kept.fresh).fresh);
  CHECK(kept.alternatives.at(kept.fresh).microbatches == f.microbatches);
  CHECK(kept.alternatives.at(kept.fresh).schedule == f.schedule);
  // A previous shape far slower than the fastest is marked, and not kept.
  const mp::PlanCandidate* slow = nullptr;
  for (const mp::PlanCandidate& a : fresh.alternatives) {
    if (a.feasible && a.step_ms > fastest.step_ms * 1.5) slow = &a;
  }
  REQUIRE(slow != nullptr);
  request.previous = *slow;
  const mp::SearchResult moved = mp::SearchPlan(g.graph, profile, cluster, request);
  CHECK(moved.chosen == fresh.chosen);
  CHECK(moved.fresh == -1);
  CHECK(std::count_if(moved.alternatives.begin(), moved.alternatives.end(),
                      [](const mp::PlanCandidate& a) { return a.previous; }) == 1);
  // With other replicas than the search's, nothing is the previous plan's.
  request.previous = *other;
  request.previous->replicas = 2;
  const mp::SearchResult replicas = mp::SearchPlan(g.graph, profile, cluster, request);
  CHECK(replicas.chosen == fresh.chosen);
  CHECK(std::none_of(replicas.alternatives.begin(), replicas.alternatives.end(),
                     [](const mp::PlanCandidate& a) { return a.previous; }));
}

TEST_CASE("auto tries every training schedule, interleaved-1f1b, zbv and dualpipev cut K·v stages, and where M does not fit is said") {
  auto b = EvenChain(16, 0);
  mp::PlanRequest request;
  request.stages = 2;
  const auto result = mp::SearchPlan(b.graph, b.profile, mp::UniformCluster(2, {}), request);
  std::set<ScheduleKind> kinds;
  int ruled_out = 0;
  for (const auto& alt : result.alternatives) {
    CAPTURE(alt.microbatches);
    kinds.insert(alt.schedule);
    const bool chunked = alt.schedule == ScheduleKind::kInterleaved1F1B || mp::IsV(alt.schedule);
    CHECK(alt.chunks == (chunked ? 2 : 1));
    CHECK(alt.stages == (chunked ? 4 : 2));
    if (alt.schedule == ScheduleKind::kDualPipeV) {
      CHECK(alt.feasible == (alt.microbatches >= 4));
      if (alt.microbatches < 4) {
        CHECK(alt.why_not == "dualpipev needs M >= 2K (" + std::to_string(alt.microbatches) +
                                 " micro-batches on 2 devices)");
      }
      continue;
    }
    if (alt.schedule != ScheduleKind::kInterleaved1F1B) {
      CHECK(alt.why_not == "");
      continue;
    }
    if (alt.microbatches % 2 == 0) {
      CHECK(alt.feasible);
    } else {
      CHECK_FALSE(alt.feasible);
      CHECK(alt.why_not == "interleaved-1f1b needs M divisible by K (" + std::to_string(alt.microbatches) +
                               " micro-batches on 2 devices)");
      ++ruled_out;
    }
  }
  CHECK(kinds == std::set<ScheduleKind>{ScheduleKind::kGPipe, ScheduleKind::kOneFOneB, ScheduleKind::kZeroBubbleH1,
                                        ScheduleKind::kInterleaved1F1B, ScheduleKind::kZeroBubbleV,
                                        ScheduleKind::kDualPipeV});
  CHECK(ruled_out > 0);
  // With few micro-batches the bubble is large: both newer schedules
  // shrink it, and the fastest is chosen (a synthetic profile ties only
  // equal times).
  request.microbatches = 2;
  const auto few = mp::SearchPlan(b.graph, b.profile, mp::UniformCluster(2, {}), request);
  double best_1f1b = 1e300, best_other = 1e300;
  for (const auto& alt : few.alternatives) {
    if (alt.schedule == ScheduleKind::kDualPipeV) continue;  // M >= 2K
    REQUIRE(alt.feasible);
    const bool classic = alt.schedule == ScheduleKind::kOneFOneB || alt.schedule == ScheduleKind::kGPipe;
    (classic ? best_1f1b : best_other) = std::min(classic ? best_1f1b : best_other, alt.step_ms);
  }
  CHECK(best_other < 0.9 * best_1f1b);
  CHECK(few.predicted.step_ms == doctest::Approx(best_other));
  mp::ValidateSchedule(few.schedule);
  if (few.partition.schedule == ScheduleKind::kInterleaved1F1B) {
    REQUIRE(few.partition.stages.size() == 4);
    for (int s = 0; s < 4; ++s) CHECK(few.partition.stages[s].device == s % 2);
  }
  // zbv: the V, its middle boundary free (both ends on device 1).
  request.schedule = ScheduleKind::kZeroBubbleV;
  const auto c = EvenChain(16, 1 << 10);
  const auto v = mp::SearchPlan(c.graph, c.profile, mp::UniformCluster(2, {}, {1e6, 1}), request);
  REQUIRE(v.partition.stages.size() == 4);
  for (int s = 0; s < 4; ++s) CHECK(v.partition.stages[s].device == (s < 2 ? s : 3 - s));
  REQUIRE(v.partition.transfers.size() == 3);
  CHECK(v.partition.transfers[0].forward_ms > 1);
  CHECK(v.partition.transfers[1].forward_ms == 0);
  CHECK(v.partition.transfers[2].backward_ms > 1);
  mp::ValidateSchedule(v.schedule);
  // zb-h1's I and W add up to the backward; a first stage has no I.
  request.schedule = ScheduleKind::kZeroBubbleH1;
  const auto zb = mp::SearchPlan(b.graph, b.profile, mp::UniformCluster(2, {}), request);
  REQUIRE(zb.partition.stages.size() == 2);
  CHECK(zb.partition.stages[0].input_backward_ms == 0);
  CHECK(zb.partition.stages[0].weight_backward_ms == doctest::Approx(zb.partition.stages[0].backward_ms));
  const auto& last = zb.partition.stages[1];
  CHECK(last.input_backward_ms > 0);
  CHECK(last.input_backward_ms + last.weight_backward_ms == doctest::Approx(last.backward_ms));
}

TEST_CASE("interleaved-1f1b: each of a device's v stages may use 1/v of its memory") {
  auto b = EvenChain(16, 1 << 10);
  mp::PlanRequest request;
  request.stages = 2;
  request.microbatches = 2;
  request.schedule = ScheduleKind::kInterleaved1F1B;
  mp::Device device;
  const auto unlimited = mp::SearchPlan(b.graph, b.profile, mp::UniformCluster(2, device), request);
  int64_t device_peak = 0;
  for (int64_t bytes : unlimited.predicted.device_peak_memory_bytes) device_peak = std::max(device_peak, bytes);
  int64_t stage_peak = 0;
  for (const auto& st : unlimited.partition.stages) stage_peak = std::max(stage_peak, st.peak_memory_bytes);
  // A device that holds one stage's peak but not two is too small.
  device.memory_bytes = stage_peak + 1;
  CHECK_THROWS_AS(mp::SearchPlan(b.graph, b.profile, mp::UniformCluster(2, device), request), mp::PlanError);
  device.memory_bytes = 2 * stage_peak;
  const auto fits = mp::SearchPlan(b.graph, b.profile, mp::UniformCluster(2, device), request);
  for (int64_t bytes : fits.predicted.device_peak_memory_bytes) CHECK(bytes <= device.memory_bytes);
  CHECK(device_peak <= 2 * stage_peak);
}

TEST_CASE("an even chain with free links uses every device and many micro-batches") {
  auto b = EvenChain(16, 0);
  mp::PlanRequest request;
  auto result = mp::SearchPlan(b.graph, b.profile, mp::UniformCluster(4, {}), request);
  // zbv: 8 stages on 4 devices.
  CHECK(result.partition.stages.size() == 8);
  CHECK(result.partition.microbatches == 32);
  CHECK(result.partition.method == "dp");
  for (const auto& stage : result.partition.stages) CHECK(stage.nodes.size() == 2);
  std::map<ScheduleKind, int> rows;
  const mp::PlanCandidate* one_f_one_b = nullptr;
  for (const auto& alt : result.alternatives) {
    ++rows[alt.schedule];
    if (!alt.feasible) {
      // M not a multiple of K, or under 2K
      CHECK((alt.schedule == ScheduleKind::kInterleaved1F1B || alt.schedule == ScheduleKind::kDualPipeV));
      continue;
    }
    CHECK(result.predicted.step_ms <= alt.step_ms + 1e-9);
    if (alt.schedule == ScheduleKind::kOneFOneB && alt.stages == 4 && alt.microbatches == 32) one_f_one_b = &alt;
  }
  // K x M each; interleaving and the V from K = 2.
  CHECK(rows == std::map<ScheduleKind, int>{{ScheduleKind::kGPipe, 44},
                                            {ScheduleKind::kOneFOneB, 44},
                                            {ScheduleKind::kZeroBubbleH1, 44},
                                            {ScheduleKind::kInterleaved1F1B, 33},
                                            {ScheduleKind::kZeroBubbleV, 33},
                                            {ScheduleKind::kDualPipeV, 33}});
  mp::ValidateSchedule(result.schedule);
  // An alternative left unsimulated has a bound below its real step time.
  int pruned = 0;
  for (const auto& alt : result.alternatives) {
    if (alt.simulated || !alt.feasible) continue;
    ++pruned;
    mp::PlanRequest fixed;
    fixed.stages = alt.stages / alt.chunks;
    fixed.microbatches = alt.microbatches;
    fixed.schedule = alt.schedule;
    fixed.known_cuts = false;  // the DP's own cut, which the bound is for
    auto one = mp::SearchPlan(b.graph, b.profile, mp::UniformCluster(4, {}), fixed);
    CHECK(one.alternatives.front().simulated);
    CHECK(alt.step_ms <= one.predicted.step_ms + 1e-9);
  }
  CHECK(pruned > 0);
  // 1F1B per micro-batch of 1 sample: 16 nodes x 3 ms / 32 x 4 per stage:
  // (M + K - 1) t; zb-h1 fills part of that bubble with W, zbv halves
  // what is left (its fill is K - 1 chunks of half a stage).
  REQUIRE(one_f_one_b != nullptr);
  CHECK(one_f_one_b->step_ms == doctest::Approx((32 + 3) * 4 * 3.0 / 32));
  CHECK(result.partition.schedule == ScheduleKind::kZeroBubbleV);
  CHECK(result.predicted.step_ms < 0.97 * one_f_one_b->step_ms);
  for (const auto& alt : result.alternatives)
    if (alt.schedule == ScheduleKind::kZeroBubbleH1 && alt.simulated) CHECK(result.predicted.step_ms < alt.step_ms);
}

TEST_CASE("a slow link makes one stage the answer") {
  auto b = EvenChain(8, 1 << 20);
  mp::PlanRequest request;
  auto result = mp::SearchPlan(b.graph, b.profile, mp::UniformCluster(4, {}, {1e6, 1.0}), request);
  CHECK(result.partition.stages.size() == 1);
  CHECK(result.partition.microbatches == 1);
}

TEST_CASE("CPU workers that slow each other down make pipelining worth less") {
  auto b = EvenChain(8, 0);
  mp::PlanRequest request;
  request.schedule = ScheduleKind::kOneFOneB;  // one stage per device
  mp::Cluster shared = mp::UniformCluster(2, {});
  const auto free = mp::SearchPlan(b.graph, b.profile, shared, request);
  REQUIRE(free.partition.stages.size() == 2);
  // 1.5x slower together: while both stages compute, each runs 1.5x slower.
  shared.shared_slowdown = {1, 1.5};
  CHECK(mp::PipelineSlowdown(shared.shared_slowdown, 1, 1) == std::vector<double>{1});
  CHECK(mp::PipelineSlowdown(shared.shared_slowdown, 2, 1) == std::vector<double>{1, 1.5});
  // beyond the measured: the last factor; replicas run alongside
  CHECK(mp::PipelineSlowdown(shared.shared_slowdown, 2, 2) == std::vector<double>{1.5, 1.5});
  CHECK(mp::PipelineSlowdown({}, 2, 1).empty());
  request.stages = 2;
  request.microbatches = free.partition.microbatches;
  request.schedule = free.partition.schedule;
  const auto slowed = mp::SearchPlan(b.graph, b.profile, shared, request);
  REQUIRE(slowed.partition.stages.size() == 2);
  double busy = 0, free_busy = 0;
  for (int s = 0; s < 2; ++s) {
    // A stage's own time is its time alone; the overlap is the simulator's.
    CHECK(slowed.partition.stages[s].forward_ms == doctest::Approx(free.partition.stages[s].forward_ms));
    busy += slowed.predicted.busy_ms[s];
    free_busy += free.predicted.busy_ms[s];
  }
  // The first forward and the last backward run alone; the rest overlap.
  CHECK(busy > 1.3 * free_busy);
  CHECK(busy < 1.5 * free_busy);
  CHECK(slowed.predicted.step_ms > 1.3 * free.predicted.step_ms);
  CHECK(slowed.predicted.step_ms < 1.5 * free.predicted.step_ms);
  // Twice as slow together: two workers no longer beat one.
  shared.shared_slowdown = {1, 2.5};
  const auto one = mp::SearchPlan(b.graph, b.profile, shared, mp::PlanRequest{});
  CHECK(one.partition.stages.size() == 1);
  shared.shared_slowdown = {1, 0.5};
  CHECK_THROWS_WITH_AS(mp::SearchPlan(b.graph, b.profile, shared, mp::PlanRequest{}),
                       "cluster: shared_slowdown[1]: 0.5; expected >= 1", InputError);
}

TEST_CASE("inference uses the forward-only schedule") {
  auto b = EvenChain(8, 0);
  b.profile.training = false;
  mp::PlanRequest request;
  request.training = false;
  auto result = mp::SearchPlan(b.graph, b.profile, mp::UniformCluster(2, {}), request);
  for (const auto& alt : result.alternatives) CHECK(alt.schedule == ScheduleKind::kForwardOnly);
  CHECK(result.partition.stages.size() == 2);
  CHECK(result.partition.stages[0].backward_ms == 0);
}

TEST_CASE("never more stages than nodes that take time") {
  mp::testing::GraphBuilder b(kSizes);
  int v = b.Input(1);
  for (int i = 0; i < 6; ++i) v = b.Node("n", {v}, i % 2 ? 1.0 : 0.0, i % 2 ? 1.0 : 0.0, 1);
  b.Output(v);
  auto result = mp::SearchPlan(b.graph, b.profile, mp::UniformCluster(8, {}), mp::PlanRequest{});
  for (const auto& alt : result.alternatives) CHECK(alt.stages <= 3);
  mp::PlanRequest fixed;
  fixed.stages = 5;
  CHECK_THROWS_WITH_AS(mp::SearchPlan(b.graph, b.profile, mp::UniformCluster(8, {}), fixed),
                       doctest::Contains("only 3 nodes take time"), mp::PlanError);
}

TEST_CASE("fixed stages, micro-batches and schedule, and baselines behind the same interface") {
  auto b = EvenChain(8, 16);
  mp::PlanRequest request;
  request.stages = 2;
  request.microbatches = 4;
  request.schedule = ScheduleKind::kOneFOneB;
  auto cluster = mp::UniformCluster(4, {}, {1e8, 0.01});
  auto dp = mp::SearchPlan(b.graph, b.profile, cluster, request);
  CHECK(dp.alternatives.size() == 1);
  CHECK(dp.partition.microbatch_size == 8);
  CHECK(dp.partition.stages[1].receives.size() == 1);
  CHECK(dp.partition.stages[0].sends[0].bytes == 16 * 8);
  for (const char* method : {"uniform", "params", "block"}) {
    request.method = method;
    auto base = mp::SearchPlan(b.graph, b.profile, cluster, request);
    CHECK(base.partition.method == method);
    CHECK(dp.partition.bottleneck_ms <= base.partition.bottleneck_ms + 1e-9);
  }
  request.method = "layers";
  request.layer_split = "layer0,layer1,layer2 | layer3,layer4,layer5,layer6,layer7";
  auto layers = mp::SearchPlan(b.graph, b.profile, cluster, request);
  CHECK(layers.partition.stages[0].nodes == std::vector<int>{0, 1, 2});
  request.method = "magic";
  CHECK_THROWS_WITH_AS(mp::SearchPlan(b.graph, b.profile, cluster, request), doctest::Contains("'magic'"), InputError);
}

TEST_CASE("memory limits: the search skips what does not fit, or says why nothing does") {
  auto b = EvenChain(8, 1 << 10);
  auto cluster = mp::UniformCluster(4, {"small", 22000, 1.0});
  auto result = mp::SearchPlan(b.graph, b.profile, cluster, mp::PlanRequest{});
  bool some_infeasible = false;
  for (const auto& alt : result.alternatives) {
    // not interleaving's M rule, nor dualpipev's
    if (!alt.feasible && alt.why_not.find("divisible") == std::string::npos &&
        alt.why_not.find("M >= 2K") == std::string::npos) {
      some_infeasible = true;
      CHECK(alt.why_not.find("no partition into") != std::string::npos);
    }
  }
  CHECK(some_infeasible);
  for (const auto& stage : result.partition.stages) CHECK(stage.peak_memory_bytes <= 22000);
  auto tiny = mp::UniformCluster(2, {"tiny", 1000, 1.0});
  CHECK_THROWS_WITH_AS(mp::SearchPlan(b.graph, b.profile, tiny, mp::PlanRequest{}),
                       doctest::Contains("the smallest limit that fits is"), mp::PlanError);
}

TEST_CASE("recomputation: auto buys memory with forward time only where a stage would not fit, always everywhere") {
  auto b = EvenChain(8, 1 << 12);
  mp::PlanRequest request;
  request.stages = 2;
  request.microbatches = 8;  // gpipe holds all 8 in flight
  request.schedule = ScheduleKind::kGPipe;
  const auto unlimited = mp::UniformCluster(2, mp::Device{});
  // The smallest limits a cut into 2 stages fits, keeping or recomputing.
  const auto order = mp::PipelineOrder(b.graph);
  const mp::OrderCosts costs = mp::ComputeOrderCosts(b.graph, b.profile, order, b.profile.batch / 8, true);
  const auto smallest = [&](mp::Recompute r) {
    const mp::StageCostModel model(costs, mp::StageSpecs(unlimited, ScheduleKind::kGPipe, 2, 8, 1, r), 2.0);
    return mp::SmallestMemoryLimit(model);
  };
  const int64_t keeping = smallest(mp::Recompute::kNever), recomputing = smallest(mp::Recompute::kAlways);
  REQUIRE(recomputing < keeping);
  CHECK(smallest(mp::Recompute::kAuto) == recomputing);
  // Without a limit auto is never: nothing recomputes.
  request.recompute = mp::Recompute::kAuto;
  const mp::SearchResult free = mp::SearchPlan(b.graph, b.profile, unlimited, request);
  for (const mp::Stage& s : free.partition.stages) CHECK_FALSE(s.recompute);
  request.recompute = mp::Recompute::kNever;
  CHECK(mp::SearchPlan(b.graph, b.profile, unlimited, request).predicted.step_ms == free.predicted.step_ms);
  // Between the two limits, never finds no plan and auto does, recomputing.
  const auto tight = mp::UniformCluster(2, {"tight", (keeping + recomputing) / 2, 1.0});
  CHECK_THROWS_WITH_AS(mp::SearchPlan(b.graph, b.profile, tight, request),
                       doctest::Contains("the smallest limit that fits is"), mp::PlanError);
  request.recompute = mp::Recompute::kAuto;
  const mp::SearchResult fit = mp::SearchPlan(b.graph, b.profile, tight, request);
  int recomputed = 0;
  for (const mp::Stage& s : fit.partition.stages) {
    CHECK(s.peak_memory_bytes <= (keeping + recomputing) / 2);
    if (!s.recompute) continue;
    ++recomputed;
    CHECK(s.recompute_ms == doctest::Approx(s.forward_ms));  // its forward again
    CHECK(s.recomputed_bytes > s.activation_bytes);          // boundaries held, not everything
    CHECK(s.cost_ms == doctest::Approx(s.forward_ms * 2 + s.backward_ms + s.transfer_ms));
  }
  CHECK(recomputed >= 1);
  CHECK(fit.predicted.step_ms > free.predicted.step_ms);  // the forward again is in the step
  // always: every stage, and never a zero-bubble schedule.
  request.recompute = mp::Recompute::kAlways;
  const mp::SearchResult all = mp::SearchPlan(b.graph, b.profile, unlimited, request);
  for (const mp::Stage& s : all.partition.stages) CHECK(s.recompute);
  CHECK(all.predicted.step_ms >= fit.predicted.step_ms);
  request.schedule = ScheduleKind::kZeroBubbleH1;
  CHECK_THROWS_WITH_AS(mp::SearchPlan(b.graph, b.profile, unlimited, request),
                       doctest::Contains("zb-h1 keeps each micro-batch's graph from I to W"), InputError);
  request.schedule.reset();  // auto leaves zb-h1 and zbv out
  for (const mp::PlanCandidate& a : mp::SearchPlan(b.graph, b.profile, unlimited, request).alternatives) {
    CHECK_FALSE(mp::SplitsBackward(a.schedule));
  }
  CHECK(mp::ParseRecompute("auto") == mp::Recompute::kAuto);
  CHECK_THROWS_WITH_AS(mp::ParseRecompute("sometimes"), "recompute 'sometimes': expected never, auto or always",
                       InputError);
}

TEST_CASE("malformed requests are InputErrors") {
  auto b = EvenChain(4, 1);
  auto cluster = mp::UniformCluster(2, {});
  mp::PlanRequest r;
  r.stages = 3;
  CHECK_THROWS_WITH_AS(mp::SearchPlan(b.graph, b.profile, cluster, r), doctest::Contains("3 stages requested for 2"),
                       InputError);
  r = {};
  r.schedule = ScheduleKind::kForwardOnly;
  CHECK_THROWS_WITH_AS(mp::SearchPlan(b.graph, b.profile, cluster, r), doctest::Contains("does not fit training"),
                       InputError);
  r = {};
  r.microbatches = 64;
  CHECK_THROWS_AS(mp::SearchPlan(b.graph, b.profile, cluster, r), InputError);
  r = {};
  r.batch = 128;
  r.microbatches = 2;
  CHECK_THROWS_WITH_AS(mp::SearchPlan(b.graph, b.profile, cluster, r), doctest::Contains("outside the profiled sizes"),
                       mp::PlanError);
  r = {};
  r.method = "layers";
  r.layer_split = "layer0 | layer1 | layer2";
  CHECK_THROWS_WITH_AS(mp::SearchPlan(b.graph, b.profile, cluster, r), doctest::Contains("3 groups"), InputError);
  b.profile.training = false;
  CHECK_THROWS_WITH_AS(mp::SearchPlan(b.graph, b.profile, cluster, mp::PlanRequest{}),
                       doctest::Contains("no backward times"), InputError);
  mp::Cluster empty;
  CHECK_THROWS_WITH_AS(mp::SearchPlan(b.graph, b.profile, empty, mp::PlanRequest{}), doctest::Contains("no devices"),
                       InputError);
}

TEST_CASE("a ring all-reduce moves 2 (R - 1) chunks of bytes / R") {
  const mp::Link link{1e6, 0.5};  // 1 MB/s: 1000 bytes take 1 ms
  CHECK(mp::AllReduceMs(4000, 4, link) == doctest::Approx(6 * (0.5 + 1.0)));
  CHECK(mp::AllReduceMs(4000, 2, link) == doctest::Approx(2 * (0.5 + 2.0)));
  CHECK(mp::AllReduceMs(4000, 1, link) == 0);
  CHECK(mp::AllReduceMs(0, 4, link) == 0);
}

TEST_CASE("replicas: each pipeline runs batch / R, and a slow all-reduce favours more stages") {
  auto b = EvenChain(16, 0);  // 1000 parameter bytes a node
  mp::Cluster cluster = mp::UniformCluster(4, {});
  cluster.replicas = 2;
  mp::PlanRequest request;
  request.batch = 32;
  const auto result = mp::SearchPlan(b.graph, b.profile, cluster, request);
  for (const auto& alt : result.alternatives) CHECK(alt.microbatch_size * alt.microbatches >= 16);
  CHECK(result.partition.microbatch_size * result.partition.microbatches <= 16 + result.partition.microbatch_size);
  // Free links: the all-reduce costs nothing and the search is the one
  // pipeline's on 16 samples.
  mp::PlanRequest half = request;
  half.batch = 16;
  half.schedule = result.partition.schedule;
  half.chunks = result.partition.schedule == mp::ScheduleKind::kInterleaved1F1B ? result.partition.chunks : 0;
  CHECK(result.predicted.step_ms ==
        doctest::Approx(mp::SearchPlan(b.graph, b.profile, mp::UniformCluster(4, {}), half).predicted.step_ms));
  // A slow replica link: all-reducing 16,000 bytes in one stage takes
  // 16 ms, in four stages 4 ms each, side by side (or in 8, two a device).
  cluster.replica_link = {1e6, 0};
  const auto slow = mp::SearchPlan(b.graph, b.profile, cluster, request);
  CHECK(slow.partition.stages.size() >= 4);
  for (const auto& st : slow.partition.stages) CHECK(st.allreduce_ms == doctest::Approx(mp::AllReduceMs(st.gradient_bytes, 2, cluster.replica_link)));
  request.batch = 33;
  CHECK_THROWS_AS(mp::SearchPlan(b.graph, b.profile, cluster, request), mp::InputError);
}

TEST_CASE("the optimizer's step: stages split it, each replica steps its whole copy, at once slower") {
  auto b = EvenChain(16, 0);  // 1000 parameter bytes a node, each 1 ms forward and backward
  mp::PlanRequest request;
  request.batch = 32;
  request.microbatches = 4;
  request.schedule = ScheduleKind::kOneFOneB;
  const double total_mib = 16 * 1000.0 / (1 << 20);
  double gap[2] = {0, 0};  // replicas' step over the pipeline's, without and with the optimizer
  for (int with = 0; with < 2; ++with) {
    const double rate = with ? 200 : 0;  // ms a MiB: about 3 ms for the whole model
    mp::Cluster four = mp::UniformCluster(4, {});
    four.optimizer_ms_per_mib = rate;
    four.optimizer_slowdown = {1, 1.5};  // 2 or more stepping at once: 1.5x
    mp::Cluster two = four;
    two.devices.resize(2);
    two.replicas = 2;
    request.stages = 4;
    const auto pipeline = mp::SearchPlan(b.graph, b.profile, four, request);
    request.stages = 2;
    const auto replicas = mp::SearchPlan(b.graph, b.profile, two, request);
    for (const auto* r : {&pipeline, &replicas}) {
      double sum = 0;
      for (const mp::Stage& st : r->partition.stages) {
        CHECK(st.optimizer_ms == doctest::Approx(rate * 1.5 * double(st.gradient_bytes) / (1 << 20)));
        sum += st.optimizer_ms;
      }
      CHECK(sum == doctest::Approx(rate * 1.5 * total_mib));
      const double most = *std::max_element(r->predicted.optimizer_ms.begin(), r->predicted.optimizer_ms.end());
      CHECK(most == doctest::Approx(rate * 1.5 * total_mib / double(r->partition.stages.size())).epsilon(0.15));
    }
    gap[with] = replicas.predicted.step_ms - pipeline.predicted.step_ms;
  }
  // Each replica device steps half the model, each pipeline device a
  // quarter: the optimizer widens the replicas' gap by about 3 x 1.5 / 4.
  CHECK(gap[1] - gap[0] == doctest::Approx(200 * 1.5 * total_mib / 4).epsilon(0.2));
}

TEST_CASE("--objective throughput-per-device: the choice minimises step x devices") {
  // The even chain pipelines well (8 stages on 4 devices for the step),
  // but no pipeline gives more samples per second per device than one
  // device: the bubble and the transfers only add device time.
  auto even = EvenChain(16, 0);
  mp::PlanRequest request;
  request.objective = mp::Objective::kThroughputPerDevice;
  const auto result = mp::SearchPlan(even.graph, even.profile, mp::UniformCluster(4, {}), request);
  const mp::PlanCandidate& c = result.alternatives.at(result.chosen);
  const double best = mp::RankMs(result.alternatives.at(result.fastest), request.objective);
  CHECK(mp::Devices(c) == 1);
  CHECK(mp::RankMs(c, request.objective) <= best * (1 + mp::kDefaultDeviceTolerance));
  for (const auto& a : result.alternatives) {
    if (a.simulated) CHECK(best <= mp::RankMs(a, request.objective) + 1e-9);
  }
  // Where one device cannot hold the model, the fewest devices that can,
  // as long as they give the most per device.
  auto big = EvenChain(8, 1 << 10);
  const auto cluster = mp::UniformCluster(4, {"small", 22000, 1.0});
  const auto fit = mp::SearchPlan(big.graph, big.profile, cluster, request);
  int fewest = 0;
  for (const auto& a : fit.alternatives) {
    if (a.feasible && (fewest == 0 || mp::Devices(a) < fewest)) fewest = mp::Devices(a);
  }
  REQUIRE(fewest > 1);
  CHECK(mp::Devices(fit.alternatives.at(fit.chosen)) == fewest);
  for (const auto& stage : fit.partition.stages) CHECK(stage.peak_memory_bytes <= 22000);
}

TEST_CASE("devices are not spent for nothing: a plan on more devices must beat the best on fewer by the tolerance") {
  // One node carries nearly all the work: pipelining the rest around it
  // gains about 1.5%, on as many devices as there are nodes.
  auto b = mp::testing::Chain({200, 1, 1, 1}, 0, 1000, kSizes);
  mp::PlanRequest request;
  request.device_tolerance = 0;  // the fastest, whatever it uses
  const auto fastest = mp::SearchPlan(b.graph, b.profile, mp::UniformCluster(4, {}), request);
  const mp::PlanCandidate& f = fastest.alternatives.at(fastest.chosen);
  CHECK(fastest.chosen == fastest.fastest);
  REQUIRE(mp::Devices(f) > 1);
  request.device_tolerance = mp::kDefaultDeviceTolerance;
  const auto frugal = mp::SearchPlan(b.graph, b.profile, mp::UniformCluster(4, {}), request);
  const mp::PlanCandidate& c = frugal.alternatives.at(frugal.chosen);
  const double best = frugal.alternatives.at(frugal.fastest).step_ms;
  CHECK(mp::Devices(c) == 1);
  CHECK(c.step_ms > best);
  CHECK(c.step_ms <= best * (1 + mp::kDefaultDeviceTolerance));
  CHECK(c.tie);
  CHECK(frugal.alternatives.at(frugal.fastest).tie);
  // On its one device it is still the fastest: a device profile's times
  // (no band) tie only when equal.
  for (const auto& a : frugal.alternatives) {
    if (a.simulated && mp::Devices(a) == 1) CHECK(c.step_ms <= a.step_ms + 1e-9);
  }
  // A pipeline that pays for its devices keeps them (the even chain above).
  auto even = EvenChain(16, 0);
  CHECK(mp::SearchPlan(even.graph, even.profile, mp::UniformCluster(4, {}), mp::PlanRequest{}).partition.stages.size() == 8);
  request.device_tolerance = 1;
  CHECK_THROWS_AS(mp::SearchPlan(b.graph, b.profile, mp::UniformCluster(4, {}), request), InputError);
}

TEST_CASE("zb-h1: a stage whose I + W costs more than its B runs B where the step simulates faster") {
  // Measured I and W as long as B each (an LSTM's I is most of its B, and
  // its W dispatches every step's weight ops again): the split moves
  // nothing off the critical path and adds a W per micro-batch. The search
  // keeps zb-h1 (asked for) and runs B on the stages where that is faster;
  // the plan's lists say B for them and W for none.
  auto b = EvenChain(8, 16);
  for (mp::NodeCost& n : b.profile.nodes) n.input_backward_ms = n.weight_backward_ms = n.backward_ms;
  mp::PlanRequest request;
  request.stages = 2;
  request.microbatches = 4;
  request.schedule = ScheduleKind::kZeroBubbleH1;
  const auto cluster = mp::UniformCluster(2, {}, {1e8, 0.01});
  const auto result = mp::SearchPlan(b.graph, b.profile, cluster, request);
  const mp::Stage& last = result.partition.stages[1];
  REQUIRE(last.input_backward_ms + last.weight_backward_ms > last.backward_ms);
  CHECK(last.whole_backward);
  CHECK(last.weight_gradient_bytes == 0);
  CHECK_FALSE(result.partition.stages[0].whole_backward);  // the first stage's W is its B already
  CHECK(mp::FormatActions(mp::ComputeActions(result.schedule.actions[1])) == "1F0 1B0 1F1 1B1 1F2 1B2 1F3 1B3");
  mp::Partition split = result.partition;
  split.stages[1].whole_backward = false;
  CHECK(result.predicted.step_ms < mp::SimulatePartition(split).step_ms);
  // Where I + W is B, every stage splits.
  auto even = EvenChain(8, 16);
  const auto plain = mp::SearchPlan(even.graph, even.profile, cluster, request);
  for (const mp::Stage& st : plain.partition.stages) CHECK_FALSE(st.whole_backward);
}

TEST_CASE("replica counts that share a memo search as each would alone") {
  std::mt19937 rng(29);
  auto b = mp::testing::RandomDag(rng, 40, {1, 2, 4, 8});
  // Each size's times of their own: each size cuts elsewhere.
  std::uniform_real_distribution<double> ms(0.1, 10.0);
  for (auto& node : b.profile.nodes) {
    for (double& t : node.forward_ms) t = ms(rng);
  }
  int too_big = 0;  // alternatives the memory limit rules out: it binds
  for (const int64_t memory : {mp::kUnlimitedMemory, int64_t(3000000)}) {
    mp::SearchMemo memo;
    for (int r : {1, 2, 4, 8, 2}) {  // the last reads tables built for more stages
      mp::Cluster cluster = mp::UniformCluster(8 / r, {"d", memory, 1.0}, {1e7, 0.05});
      cluster.replicas = r;
      cluster.replica_link = {1e7, 0.05};
      mp::PlanRequest request;
      request.batch = 8;
      CAPTURE(memory);
      CAPTURE(r);
      mp::SearchResult alone, shared;
      try {
        alone = mp::SearchPlan(b.graph, b.profile, cluster, request);
      } catch (const mp::PlanError& e) {
        CHECK_THROWS_WITH_AS(mp::SearchPlan(b.graph, b.profile, cluster, request, &memo), e.what(), mp::PlanError);
        continue;
      }
      shared = mp::SearchPlan(b.graph, b.profile, cluster, request, &memo);
      CHECK(shared.chosen == alone.chosen);
      CHECK(shared.partition.bounds == alone.partition.bounds);
      CHECK(shared.predicted.step_ms == alone.predicted.step_ms);
      REQUIRE(shared.alternatives.size() == alone.alternatives.size());
      for (size_t i = 0; i < alone.alternatives.size(); ++i) {
        CHECK(shared.alternatives[i].step_ms == alone.alternatives[i].step_ms);
        CHECK(shared.alternatives[i].why_not == alone.alternatives[i].why_not);
        too_big += alone.alternatives[i].why_not.find("needs") != std::string::npos;
      }
    }
  }
  CHECK(too_big > 0);
}

TEST_CASE("a memo's table built on another thread, and its models sharing sums, are the ones built in place") {
  std::mt19937 rng(53);
  const mp::Cluster cluster = mp::UniformCluster(4, {"d", mp::kUnlimitedMemory, 1.5}, {1e6, 0.05});
  const auto specs = mp::StageSpecs(cluster, ScheduleKind::kOneFOneB, 1, 4);
  // The table of `memo` for `base`, of `top` stages (on another thread
  // where it is large enough, and the machine has a core to spare), against
  // one built in place, for every stage count.
  const auto same_table = [&](mp::SearchMemo& memo, const mp::StageCostModel& base, int top) {
    mp::StageSpec spec = mp::StageSpecs(cluster, ScheduleKind::kOneFOneB, 4, 4)[0];
    memo.Prefetch(base, spec, top);
    memo.Prefetch(base, spec, top);  // under way already: nothing more
    const mp::BottleneckDp& table = memo.Table(base, spec, top);
    spec.memory_bytes = mp::kUnlimitedMemory;
    const mp::BottleneckDp in_place(base.WithStages(std::vector<mp::StageSpec>(size_t(top), spec)));
    for (int k = 1; k <= top; ++k) {
      CAPTURE(k);
      const mp::DpSolution threaded = table.Solve(k), direct = in_place.Solve(k);
      CHECK(threaded.feasible == direct.feasible);
      CHECK(threaded.bottleneck_ms == direct.bottleneck_ms);
      CHECK(threaded.bounds == direct.bounds);
    }
  };
  for (int trial = 0; trial < 40; ++trial) {
    CAPTURE(trial);
    auto b = mp::testing::RandomDag(rng, std::uniform_int_distribution<int>(6, 30)(rng), {2, 4});
    mp::SearchMemo memo;
    const std::vector<int>& order = memo.Order(b.graph);
    CHECK(order == mp::PipelineOrder(b.graph));
    for (const int64_t size : {2, 4}) {
      const auto costs = memo.Costs(b.graph, b.profile, order, size, true);
      const mp::StageCostModel base = memo.Model(*costs, specs, 2.0);
      const mp::StageCostModel own(*costs, specs, 2.0);
      const mp::StageCostModel again = memo.Model(*costs, specs, 2.0);  // shares the first's sums
      for (int a = 0; a < own.Positions(); ++a) {
        for (int e = a + 1; e <= own.Positions(); ++e) {
          CHECK(base.StageMs(0, a, e) == own.StageMs(0, a, e));
          CHECK(again.MemoryBytes(0, a, e) == own.MemoryBytes(0, a, e));
          CHECK(again.TransientBytes(a, e, true) == own.TransientBytes(a, e, true));
        }
      }
      same_table(memo, base, std::min(4, base.UsefulNodes()));
    }
  }
  // Tables of 3,000 positions: 12,000 and 18,000 states, each past the
  // size worth a thread (the second asks for more stages than the first).
  std::uniform_real_distribution<double> ms(0.5, 2.0);
  std::vector<double> times(3000);
  for (double& t : times) t = ms(rng);
  auto chain = mp::testing::Chain(times, 1000, 10, {2, 4});
  mp::SearchMemo memo;
  for (const int64_t size : {2, 4}) {
    const auto costs = memo.Costs(chain.graph, chain.profile, memo.Order(chain.graph), size, true);
    const mp::StageCostModel base = memo.Model(*costs, specs, 2.0);
    same_table(memo, base, 4);
    same_table(memo, base, 6);
  }
}
