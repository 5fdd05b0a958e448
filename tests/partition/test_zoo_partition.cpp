// The DP against the baselines on real measured profiles of zoo models:
// never worse on the bottleneck it optimises; and on fixed times of the
// branchy model and ResNet-50, strictly better, where equal node counts or
// parameter bytes are far from equal time. And the search's choice on noisy
// profiles of zoo models: the same plan every time, where the fastest
// alternative moves.
#include "tests/doctest_torch.h"

#include "planner/graph/build_op_graph.h"
#include "planner/graph/model_file.h"
#include "planner/graph/run_graph.h"
#include "planner/partition/cut_cost.h"
#include "planner/partition/order.h"
#include "planner/partition/partition.h"
#include "planner/partition/search.h"
#include "planner/profile/analytic.h"
#include "planner/profile/measure.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <vector>
#include "../graph/zoo.h"

namespace {

struct Measured {
  mp::OpGraph graph;
  mp::Profile profile;
};

// The zoo model's op graph and its profile at `batch`, taken with `options`.
Measured Profiled(const std::string& name, int64_t batch, mp::MeasureOptions options) {
  mp::ModelFile file = mp::LoadModelFile(mp::test::ZooPath(name));
  mp::CanonicalOptions canonical_options;
  canonical_options.training = true;
  const mp::CanonicalGraph canonical = mp::Canonicalize(file.module, canonical_options);
  const auto inputs = mp::WithBatch(file.input_spec, batch);
  Measured m;
  m.graph = mp::BuildOpGraph(canonical);
  mp::FillShapes(canonical, mp::SyntheticInputs(inputs), m.graph);
  options.training = true;
  m.profile = mp::MeasureProfile(canonical, inputs, options);
  return m;
}

// Measured once per test process: the subcases below share the profiles.
const Measured& Measure(const std::string& name, int64_t batch) {
  static std::map<std::pair<std::string, int64_t>, Measured> cache;
  auto it = cache.find({name, batch});
  if (it != cache.end()) return it->second;
  mp::MeasureOptions options;
  options.microbatch_sizes = {1, batch};
  options.timing.warmup = 1;
  options.timing.repeats = 3;
  return cache.emplace(std::make_pair(name, batch), Profiled(name, batch, options)).first->second;
}

double Bottleneck(const Measured& m, const std::string& method, int stages) {
  mp::PlanRequest request;
  request.method = method;
  request.stages = stages;
  request.microbatches = static_cast<int>(m.profile.batch);  // micro-batch 1
  request.schedule = mp::ScheduleKind::kOneFOneB;
  // The DP's own cut: the search would keep a baseline's where that
  // simulates a faster step, whatever its slowest stage.
  request.known_cuts = false;
  const mp::Cluster cluster = mp::UniformCluster(4, mp::Device{});
  return mp::SearchPlan(m.graph, m.profile, cluster, request).partition.bottleneck_ms;
}

// The zoo model with fixed times: a shapes pass at the default sizes and
// the A100 device profile's estimates.
Measured Estimated(const std::string& name, int64_t batch, const std::string& device = "a100-80gb") {
  mp::MeasureOptions options;
  options.timed = false;
  Measured m = Profiled(name, batch, options);
  m.profile = mp::AnalyticProfile(m.profile, m.graph, mp::LoadDeviceProfile(device));
  return m;
}

// `fixed` as one noisy profiling would leave it: every size's times off by
// up to `noise` either way, and every node's by as much again (a fixed
// generator per seed), and the noise recorded as the profile's bands.
mp::Profile Noisy(const mp::Profile& fixed, uint64_t seed, double noise, bool banded) {
  mp::Profile p = fixed;
  uint64_t state = seed;
  const auto jitter = [&] {  // SplitMix64 to [1 - noise, 1 + noise]
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return 1 + noise * (2 * double(z >> 11) / double(1ULL << 53) - 1);
  };
  // Each size's passes in a stretch of their own (the whole size a little
  // faster or slower), and each node a little off on top.
  std::vector<double> stretch;
  for (size_t i = 0; i < p.microbatch_sizes.size(); ++i) stretch.push_back(jitter());
  for (mp::NodeCost& node : p.nodes) {
    for (size_t i = 0; i < node.forward_ms.size(); ++i) node.forward_ms[i] *= stretch[i] * jitter();
    for (size_t i = 0; i < node.backward_ms.size(); ++i) node.backward_ms[i] *= stretch[i] * jitter();
  }
  p.repeats = 5;
  if (banded) {
    p.pass_band = {1 - noise, 1 + noise};
    p.reference_ms = 1;
    p.reference_band = {1 - noise, 1 + noise};
  }
  return p;
}

// The search at one shape on 4 identical devices: `method`'s cut, and with
// `known_cuts` the fastest cut the search knows.
mp::SearchResult SearchCut(const mp::OpGraph& graph, const mp::Profile& profile, const std::string& method,
                           bool known_cuts, int stages, int microbatches, mp::ScheduleKind schedule) {
  mp::PlanRequest request;
  request.method = method;
  request.known_cuts = known_cuts;
  request.stages = stages;
  request.microbatches = microbatches;
  request.schedule = schedule;
  return mp::SearchPlan(graph, profile, mp::UniformCluster(4, mp::Device{}), request);
}

// The models the DP is set against the baselines on, each at its batch.
const std::vector<std::pair<std::string, int64_t>> kCutModels = {{"branchy.script.pt", 4}, {"resnet50.script.pt", 2}};

}  // namespace

constexpr double kNoise = 0.03;  // either way, per size and per node

TEST_CASE("a noisy profile gives the same plan every time") {
  for (const auto& model : {std::pair<const char*, int64_t>{"mlp.script.pt", 256}, {"gpt.script.pt", 16}}) {
    const auto& name = model.first;
    const auto& batch = model.second;
    CAPTURE(name);
    const Measured m = Estimated(name, batch);
    mp::Cluster cluster = mp::UniformCluster(2, mp::Device{}, mp::Link{0, 0.05});
    mp::PlanRequest request;
    request.stages = 2;
    std::set<std::tuple<int, int, int>> chosen;
    for (uint64_t seed = 1; seed <= 8; ++seed) {
      CAPTURE(seed);
      const mp::SearchResult banded = mp::SearchPlan(m.graph, Noisy(m.profile, seed, kNoise, true), cluster, request);
      const mp::PlanCandidate& a = banded.alternatives.at(banded.chosen);
      chosen.insert({a.stages, a.microbatches, int(a.schedule)});
      CHECK(int(banded.partition.stages.size()) == a.stages);
      CHECK(banded.partition.microbatches == a.microbatches);
      CHECK(banded.predicted.step_ms == a.step_ms);
      // The choice is the simplest of the ties, never slower than the band allows.
      const mp::PlanCandidate& f = banded.alternatives.at(banded.fastest);
      CHECK(a.step_ms <= f.step_ms * mp::PredictionBand(Noisy(m.profile, seed, kNoise, true), a.stages).high);
      // ... and never slower than another of its micro-batch size by more
      // than the tie tolerance.
      for (const mp::PlanCandidate& o : banded.alternatives) {
        if (o.simulated && o.microbatch_size == a.microbatch_size && mp::Devices(o) == mp::Devices(a)) {
          CHECK(a.step_ms <= o.step_ms * (1 + request.tie_tolerance));
        }
      }
      const mp::SearchResult bare = mp::SearchPlan(m.graph, Noisy(m.profile, seed, kNoise, false), cluster, request);
      // Without bands only equal times tie (gpipe and 1f1b often do).
      const mp::PlanCandidate& b = bare.alternatives.at(bare.chosen);
      CHECK(b.step_ms == bare.alternatives.at(bare.fastest).step_ms);
    }
    CHECK(chosen.size() == 1);
    // Without bands the fastest moves only where the noise decides between
    // near-equal alternatives; on these profiles (M = 1 on GPT, where gpipe
    // and 1f1b are one schedule and used to swap by float rounding) it
    // need not, so the test asks for the stable choice only.
  }
}

TEST_CASE("replanned over its previous plan, a noisy profile keeps that plan where planning afresh moves") {
  // Estimates for this kind of machine, stages and schedule left to the
  // search: at 3% noise the fresh choice moves on Branchy (between zbv and
  // interleaved-1f1b), by a hair across the tie window. (The MLP and GPT
  // moved too, between 2 x 4 zb-h1 and 4 x 2 zbv, while ties put zb-h1
  // before interleaved-1f1b.)
  int moved = 0;
  for (const auto& model : {std::pair<const char*, int64_t>{"mlp.script.pt", 256}, {"gpt.script.pt", 16},
                           {"convnet.script.pt", 64}, {"branchy.script.pt", 16}}) {
    const auto& name = model.first;
    const auto& batch = model.second;
    CAPTURE(name);
    const Measured m = Estimated(name, batch, "generic-cpu");
    const mp::Cluster cluster = mp::UniformCluster(2, mp::Device{}, mp::Link{0, 0.05});
    const mp::PlanRequest request;
    std::set<std::tuple<int, int, int>> fresh, kept;
    std::optional<mp::PlanCandidate> first;
    for (uint64_t seed = 1; seed <= 12; ++seed) {
      CAPTURE(seed);
      const mp::Profile noisy = Noisy(m.profile, seed * 7919, kNoise, true);
      const mp::SearchResult afresh = mp::SearchPlan(m.graph, noisy, cluster, request);
      const mp::PlanCandidate& a = afresh.alternatives.at(afresh.chosen);
      fresh.insert({a.stages, a.microbatches, int(a.schedule)});
      if (!first) first = a;  // the first plan; every later one is made over it
      mp::PlanRequest replan = request;
      replan.previous = *first;
      const mp::SearchResult again = mp::SearchPlan(m.graph, noisy, cluster, replan);
      const mp::PlanCandidate& k = again.alternatives.at(again.chosen);
      kept.insert({k.stages, k.microbatches, int(k.schedule)});
      CHECK(k.previous);
      // Kept, it gives up at most the tie window and one tie tolerance more.
      CHECK(k.step_ms <= again.alternatives.at(again.fastest).step_ms * mp::TieWindow(noisy, request) *
                             (1 + request.tie_tolerance));
      // Where it differs, the plan says what the fresh choice was.
      if (k.stages != a.stages || k.microbatches != a.microbatches || k.schedule != a.schedule) {
        REQUIRE(again.fresh >= 0);
        const mp::PlanCandidate& f = again.alternatives.at(again.fresh);
        CHECK(f.stages == a.stages);
        CHECK(f.microbatches == a.microbatches);
        CHECK(f.schedule == a.schedule);
      }
    }
    CHECK(kept.size() == 1);
    moved += fresh.size() > 1;
  }
  CHECK(moved >= 1);
}

// One test case, two subcases: doctest runs the case once per subcase in
// one process, so Measure's cache profiles each model once (as two CTest
// tests, each process profiled both: 40 s of CPU, 80 under ASan).
TEST_CASE("on measured profiles of the branchy model and ResNet-50, the DP against the baselines") {
  // The sanitizer jobs keep the branchy model (ZooKeep): measuring
  // ResNet-50 under ASan took two thirds of this test's 55 s.
  std::vector<std::string> names;
  for (const auto& [name, batch] : kCutModels) names.push_back(name);
  const std::vector<std::string> kept = mp::test::ZooKeep(names);
  std::vector<std::pair<std::string, int64_t>> models;
  for (const auto& model : kCutModels) {
    if (std::find(kept.begin(), kept.end(), model.first) != kept.end()) models.push_back(model);
  }
  SUBCASE("the DP is never worse than a baseline on the slowest stage") {
    // Whether a baseline also finds the best cut depends on the machine's
    // times (under ASan it found it in all four cases): the strict win is
    // asked of fixed times, in the test case below.
    for (const auto& model : models) {
      const auto& name = model.first;
      const auto& batch = model.second;
      CAPTURE(name);
      const Measured& m = Measure(name, batch);
      for (int stages : {2, 4}) {
        CAPTURE(stages);
        const double dp = Bottleneck(m, "dp", stages);
        for (const char* baseline : {"uniform", "params", "block"}) {
          CAPTURE(baseline);
          CHECK(dp <= Bottleneck(m, baseline, stages) * (1 + 1e-12));
        }
      }
    }
  }

  SUBCASE("the plan never simulates slower than a baseline's cut, for every schedule") {
    // The DP minimises the slowest stage; the step also counts the fill and
    // drain, where a baseline's cut can be faster. The search keeps the
    // fastest known cut, so no baseline beats its step.
    int kept = 0, cases = 0;
    for (const auto& model : models) {
      const auto& name = model.first;
      const auto& batch = model.second;
      CAPTURE(name);
      const Measured& m = Measure(name, batch);
      for (const auto& layout : {std::pair<int, mp::ScheduleKind>{2, mp::ScheduleKind::kGPipe},
                                {4, mp::ScheduleKind::kOneFOneB},
                                {4, mp::ScheduleKind::kZeroBubbleH1},
                                {2, mp::ScheduleKind::kInterleaved1F1B}}) {
        const auto& devices = layout.first;
        const auto& schedule = layout.second;
        CAPTURE(devices);
        CAPTURE(mp::ScheduleName(schedule));
        const auto step = [&](const std::string& method, bool known_cuts) {
          return SearchCut(m.graph, m.profile, method, known_cuts, devices, static_cast<int>(batch), schedule);
        };
        const mp::SearchResult plan = step("dp", true);
        const double own = step("dp", false).predicted.step_ms;
        CHECK(plan.predicted.step_ms <= own * (1 + 1e-12));
        for (const char* baseline : {"uniform", "params", "block"}) {
          CAPTURE(baseline);
          CHECK(plan.predicted.step_ms <= step(baseline, false).predicted.step_ms * (1 + 1e-12));
        }
        // A kept cut is a baseline's, and strictly faster than the DP's own.
        if (!plan.partition.cut.empty()) {
          CHECK(plan.partition.cut != "dp");
          CHECK(plan.predicted.step_ms < own);
        }
        kept += !plan.partition.cut.empty();
        ++cases;
      }
    }
    MESSAGE("a baseline's cut kept in ", kept, " of ", cases, " cases");
  }
}

TEST_CASE("on fixed times of the branchy model and ResNet-50, the DP beats the baselines on the slowest stage") {
  // The A100 estimates: the same times on every machine and build, so a
  // strict win here is a fact about the cuts, not about the machine's noise.
  // Equal node counts or parameter bytes are never the best cut; torchgpipe's
  // time-balanced block partition finds it in 3 of the 4 cases (dp 0.2455
  // and 0.1254 ms on branchy, 1.1974 on ResNet-50 at 2) but not ResNet-50
  // at 4 (0.5996 against 0.6178 ms).
  int strict_wins = 0;
  for (const auto& model : kCutModels) {
    const auto& name = model.first;
    const auto& batch = model.second;
    CAPTURE(name);
    const Measured m = Estimated(name, batch);
    for (int stages : {2, 4}) {
      CAPTURE(stages);
      const double dp = Bottleneck(m, "dp", stages);
      const double block = Bottleneck(m, "block", stages);
      CHECK(dp <= block * (1 + 1e-12));
      for (const std::string baseline : {"uniform", "params"}) {
        CAPTURE(baseline);
        CHECK(dp < Bottleneck(m, baseline, stages) * (1 - 1e-9));
      }
      strict_wins += dp < block * (1 - 1e-9);
    }
  }
  CHECK(strict_wins > 0);
}

TEST_CASE("no cut a boundary move away from the chosen one simulates faster") {
  // The DP minimises the slowest stage, not the step: the search moves the
  // chosen cut's boundaries while that simulates faster (RefineCut). On the
  // A100 estimates (fixed times), every cut one position away from the
  // plan's, in either direction at any boundary, simulates no faster
  // (where both stages it divides still hold a node that takes time).
  int moved = 0, cases = 0;
  for (const auto& model : kCutModels) {
    const auto& name = model.first;
    const auto& batch = model.second;
    CAPTURE(name);
    const Measured m = Estimated(name, batch);
    for (const auto& layout : {std::pair<int, mp::ScheduleKind>{2, mp::ScheduleKind::kOneFOneB},
                              {4, mp::ScheduleKind::kOneFOneB},
                              {4, mp::ScheduleKind::kZeroBubbleH1},
                              {2, mp::ScheduleKind::kZeroBubbleV}}) {
      const auto& stages = layout.first;
      const auto& schedule = layout.second;
      CAPTURE(stages);
      CAPTURE(mp::ScheduleName(schedule));
      mp::PlanRequest request;
      request.stages = stages;
      request.microbatches = int(batch);
      request.schedule = schedule;
      const mp::Cluster cluster = mp::UniformCluster(4, mp::Device{});
      const mp::SearchResult plan = mp::SearchPlan(m.graph, m.profile, cluster, request);
      const mp::Partition& p = plan.partition;
      const int64_t size = p.microbatch_size;
      const mp::OrderCosts costs = mp::ComputeOrderCosts(m.graph, m.profile, p.order, size, true);
      const mp::StageCostModel model(
          costs, mp::StageSpecs(cluster, schedule, int(p.stages.size()), p.microbatches, p.chunks),
          mp::OptimizerStateTensors(request.optimizer));
      // The plan's own cut simulates to its prediction here, with the stages
      // it runs B on in a split schedule (ChooseWholeBackward) running B.
      const auto whole = [&](mp::Partition q) {
        for (size_t s = 0; s < q.stages.size(); ++s) q.stages[s].whole_backward = p.stages[s].whole_backward;
        return q;
      };
      const mp::Partition same =
          whole(mp::MakePartition(model, p.bounds, "dp", schedule, p.microbatches, false, p.chunks));
      CHECK(mp::SimulatePartition(same).step_ms == doctest::Approx(plan.predicted.step_ms).epsilon(1e-12));
      for (size_t i = 1; i + 1 < p.bounds.size(); ++i) {
        for (int step : {-1, 1}) {
          std::vector<int> bounds = p.bounds;
          bounds[i] += step;
          // Every stage keeps a node that takes time, as the DP's do.
          if (model.FirstUsefulEnd(bounds[i - 1]) > bounds[i] || model.FirstUsefulEnd(bounds[i]) > bounds[i + 1]) {
            continue;
          }
          const mp::Partition other =
              whole(mp::MakePartition(model, bounds, "dp", schedule, p.microbatches, false, p.chunks));
          CAPTURE(i);
          CAPTURE(step);
          CHECK(mp::SimulatePartition(other).step_ms >= plan.predicted.step_ms * (1 - 1e-9));
        }
      }
      moved += p.cut.find("neighbour") != std::string::npos;
      ++cases;
    }
  }
  // It moves boundaries in some of these cases.
  CHECK(moved > 0);
  MESSAGE("boundaries moved in ", moved, " of ", cases, " cases");
}

TEST_CASE("zb-h1 on the GPT's estimated profile keeps the params cut, moved, which simulates faster than the DP's") {
  // W fills the bubble, which the DP's per-stage cost does not see.
  const Measured m = Estimated("gpt.script.pt", 8);
  mp::PlanRequest request;
  request.stages = 2;
  request.microbatches = 1;
  request.schedule = mp::ScheduleKind::kZeroBubbleH1;
  const mp::Cluster cluster = mp::UniformCluster(2, mp::Device{});
  const mp::SearchResult kept = mp::SearchPlan(m.graph, m.profile, cluster, request);
  request.known_cuts = false;
  const mp::SearchResult own = mp::SearchPlan(m.graph, m.profile, cluster, request);
  // The params baseline's cut, then a boundary moved a node (RefineCut).
  CHECK(kept.partition.cut == "params+neighbour");
  CHECK(kept.partition.method == "dp");
  CHECK(own.partition.cut.empty());
  CHECK(kept.predicted.step_ms < own.predicted.step_ms);
  CHECK(kept.partition.bounds != own.partition.bounds);
  CHECK(kept.alternatives.at(kept.chosen).step_ms == kept.predicted.step_ms);
}

TEST_CASE("where B beats I + W on some stages, the plan never simulates slower than any known cut") {
  // Fixed times of the branchy model, each weight node's backward split
  // into I and W that add up to 0.6-2.4 times its B (the CPU's split costs
  // a fixed part on small nodes): which stages run B instead is chosen per
  // cut, and the cut whose split step was fastest need not stay so (CI
  // kept a baseline's cut 39% slower than the DP's).
  const Measured fixed = Estimated("branchy.script.pt", 4, "generic-cpu");
  for (uint64_t seed = 1; seed <= 48; ++seed) {
    CAPTURE(seed);
    mp::Profile profile = fixed.profile;
    uint64_t state = seed;
    const auto factor = [&] {  // a 64-bit LCG to [0.3, 1.2)
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      return 0.3 + 0.9 * double(state >> 11) / double(1ULL << 53);
    };
    for (mp::NodeCost& node : profile.nodes) {
      node.input_backward_ms = node.backward_ms;
      node.weight_backward_ms.assign(node.backward_ms.size(), 0.0);
      if (node.param_bytes == 0) continue;
      for (size_t i = 0; i < node.backward_ms.size(); ++i) {
        node.input_backward_ms[i] = node.backward_ms[i] * factor();
        node.weight_backward_ms[i] = node.backward_ms[i] * factor();
      }
    }
    for (const auto& layout : {std::pair<int, mp::ScheduleKind>{2, mp::ScheduleKind::kZeroBubbleH1},
                              {4, mp::ScheduleKind::kZeroBubbleH1},
                              {4, mp::ScheduleKind::kZeroBubbleV}}) {
      const auto& stages = layout.first;
      const auto& schedule = layout.second;
      CAPTURE(stages);
      CAPTURE(mp::ScheduleName(schedule));
      const auto step = [&](const std::string& method, bool known_cuts) {
        return SearchCut(fixed.graph, profile, method, known_cuts, stages, 4, schedule).predicted.step_ms;
      };
      const double plan = step("dp", true);
      for (const char* cut : {"dp", "block", "params", "uniform"}) {
        CAPTURE(cut);
        CHECK(plan <= step(cut, false) * (1 + 1e-12));
      }
    }
  }
}
