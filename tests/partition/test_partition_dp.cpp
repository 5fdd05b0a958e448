// The bottleneck DP: exact against brute force over every contiguous
// partition of random small instances, suffix tables, device speeds, and the
// memory error that names the smallest limit that fits.
#include <doctest/doctest.h>

#include <functional>
#include <limits>
#include <random>

#include "common/byte_size.h"
#include "common/error.h"
#include "planner/partition/baselines.h"
#include "planner/partition/order.h"
#include "planner/partition/partition_dp.h"
#include "tests/partition/synthetic.h"

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Calls visit(bounds) for every partition of [0, n) into k nonempty ranges.
void ForEachPartition(int n, int k, const std::function<void(const std::vector<int>&)>& visit) {
  std::vector<int> bounds = {0};
  std::function<void(int)> rec = [&](int stage) {
    if (stage == k - 1) {
      bounds.push_back(n);
      visit(bounds);
      bounds.pop_back();
      return;
    }
    for (int e = bounds.back() + 1; e <= n - (k - 1 - stage); ++e) {
      bounds.push_back(e);
      rec(stage + 1);
      bounds.pop_back();
    }
  };
  rec(0);
}

struct Brute {
  double bottleneck = kInf;
  double memory = kInf;  // min over partitions of the max stage memory
};

Brute BruteForce(const mp::StageCostModel& m) {
  Brute best;
  ForEachPartition(m.Positions(), m.Stages(), [&](const std::vector<int>& b) {
    double worst = 0, memory = 0;
    bool ok = true;
    for (int s = 0; s < m.Stages(); ++s) {
      if (m.UsefulIn(b[s], b[s + 1]) == 0) return;
      worst = std::max(worst, m.StageMs(s, b[s], b[s + 1]));
      memory = std::max(memory, double(m.MemoryBytes(s, b[s], b[s + 1])));
      ok = ok && m.Fits(s, b[s], b[s + 1]);
    }
    best.memory = std::min(best.memory, memory);
    if (ok) best.bottleneck = std::min(best.bottleneck, worst);
  });
  return best;
}

mp::Cluster RandomCluster(std::mt19937& rng, int k, bool homogeneous) {
  std::uniform_real_distribution<double> speed(0.5, 2.0), bw(1e5, 1e7), latency(0, 0.5);
  std::uniform_int_distribution<int64_t> memory(200000, 4000000);
  mp::Cluster c;
  for (int s = 0; s < k; ++s) {
    mp::Device d{"d" + std::to_string(s), rng() % 4 == 0 ? mp::kUnlimitedMemory : memory(rng), speed(rng)};
    if (homogeneous && s > 0) d = c.devices.front();
    c.devices.push_back(d);
  }
  for (int s = 0; s + 1 < k; ++s) c.links.push_back({bw(rng), latency(rng)});
  if (homogeneous) c.links.resize(std::min<size_t>(c.links.size(), 1));
  return c;
}

}  // namespace

TEST_CASE("the DP equals brute force on thousands of random small instances") {
  std::mt19937 rng(2024);
  int feasible = 0, infeasible = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int n = std::uniform_int_distribution<int>(1, 14)(rng);
    const int k = std::uniform_int_distribution<int>(1, std::min(4, n))(rng);
    auto b = mp::testing::RandomDag(rng, n);
    // Some free nodes, so that the every-stage-does-work rule matters.
    for (auto& cost : b.profile.nodes) {
      if (rng() % 6 == 0) std::fill(cost.forward_ms.begin(), cost.forward_ms.end(), 0.0);
      if (rng() % 6 == 0) std::fill(cost.backward_ms.begin(), cost.backward_ms.end(), 0.0);
    }
    const bool training = trial % 3 != 0;
    const auto kind = training ? (trial % 2 ? mp::ScheduleKind::kGPipe : mp::ScheduleKind::kOneFOneB)
                               : mp::ScheduleKind::kForwardOnly;
    const auto order = trial % 2 ? mp::PipelineOrder(b.graph) : [&] {
      std::vector<int> o(n);
      for (int i = 0; i < n; ++i) o[i] = i;
      return o;
    }();
    auto costs = mp::ComputeOrderCosts(b.graph, b.profile, order, 8, training);
    mp::StageCostModel model(costs, mp::StageSpecs(RandomCluster(rng, k, false), kind, k, 4), 2.0);
    const Brute brute = BruteForce(model);
    CAPTURE(trial);
    if (model.UsefulNodes() < k) {
      CHECK_THROWS_WITH_AS(mp::PartitionDp(model), doctest::Contains("nodes take time"), mp::PlanError);
    } else if (brute.bottleneck < kInf) {
      ++feasible;
      auto solution = mp::PartitionDp(model);
      CHECK(solution.bottleneck_ms == doctest::Approx(brute.bottleneck).epsilon(1e-12));
      double worst = 0;
      for (int s = 0; s < k; ++s) {
        CHECK(model.Fits(s, solution.bounds[s], solution.bounds[s + 1]));
        CHECK(model.UsefulIn(solution.bounds[s], solution.bounds[s + 1]) > 0);
        worst = std::max(worst, model.StageMs(s, solution.bounds[s], solution.bounds[s + 1]));
      }
      CHECK(worst == doctest::Approx(solution.bottleneck_ms).epsilon(1e-12));
    } else {
      ++infeasible;
      CHECK(mp::SmallestMemoryLimit(model) == int64_t(brute.memory));
      CHECK_THROWS_WITH_AS(mp::PartitionDp(model), doctest::Contains(mp::FormatBytes(int64_t(brute.memory)).c_str()),
                           mp::PlanError);
    }
  }
  CHECK(feasible > 1000);
  CHECK(infeasible > 100);
}

TEST_CASE("one suffix table answers every stage count on identical devices") {
  std::mt19937 rng(99);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = std::uniform_int_distribution<int>(4, 14)(rng);
    auto b = mp::testing::RandomDag(rng, n);
    auto costs = mp::ComputeOrderCosts(b.graph, b.profile, mp::PipelineOrder(b.graph), 8, true);
    const auto cluster = RandomCluster(rng, 4, true);
    const auto kind = trial % 2 ? mp::ScheduleKind::kGPipe : mp::ScheduleKind::kOneFOneB;
    mp::StageCostModel top(costs, mp::StageSpecs(cluster, kind, 4, 3), 2.0);
    mp::BottleneckDp table(top);
    for (int k = 1; k <= 4; ++k) {
      mp::StageCostModel own = top.WithStages(mp::StageSpecs(cluster, kind, k, 3));
      const Brute brute = BruteForce(own);
      auto solution = table.Solve(k);
      CAPTURE(trial);
      CAPTURE(k);
      CHECK(solution.feasible == (brute.bottleneck < kInf));
      if (solution.feasible) CHECK(solution.bottleneck_ms == doctest::Approx(brute.bottleneck).epsilon(1e-12));
    }
  }
}

TEST_CASE("one params table answers every stage count with the min-max of parameter bytes") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = std::uniform_int_distribution<int>(4, 12)(rng);
    auto b = mp::testing::RandomDag(rng, n);
    auto costs = mp::ComputeOrderCosts(b.graph, b.profile, mp::PipelineOrder(b.graph), 8, true);
    for (auto& bytes : costs.param_bytes) bytes = std::uniform_int_distribution<int64_t>(0, 1000)(rng);
    mp::StageCostModel top(costs, mp::StageSpecs(RandomCluster(rng, 4, true), mp::ScheduleKind::kGPipe, 4, 2), 2.0);
    const mp::MinMaxTable table = mp::ParamTable(top, 4);
    for (int k = 1; k <= std::min(4, top.UsefulNodes()); ++k) {
      double best = kInf;
      ForEachPartition(n, k, [&](const std::vector<int>& bounds) {
        double worst = 0;
        for (int s = 0; s < k; ++s) {
          if (top.UsefulIn(bounds[s], bounds[s + 1]) == 0) return;
          int64_t bytes = 0;
          for (int p = bounds[s]; p < bounds[s + 1]; ++p) bytes += costs.param_bytes[p];
          worst = std::max(worst, double(bytes));
        }
        best = std::min(best, worst);
      });
      CAPTURE(trial);
      CAPTURE(k);
      const mp::DpSolution solution = table.Solve(k);
      REQUIRE(solution.feasible);
      CHECK(solution.bottleneck_ms == best);
      CHECK(solution.bounds == mp::ParamBounds(top.WithStages(mp::StageSpecs(RandomCluster(rng, k, true),
                                                                              mp::ScheduleKind::kGPipe, k, 2))));
    }
  }
}

TEST_CASE("a faster device gets more of an even chain") {
  auto b = mp::testing::Chain(std::vector<double>(12, 1.0), 0);
  auto costs = mp::ComputeOrderCosts(b.graph, b.profile, mp::PipelineOrder(b.graph), 8, true);
  mp::Cluster cluster;
  cluster.devices = {{"fast", mp::kUnlimitedMemory, 0.5}, {"slow", mp::kUnlimitedMemory, 1.0}};
  mp::StageCostModel model(costs, mp::StageSpecs(cluster, mp::ScheduleKind::kGPipe, 2, 4), 2.0);
  auto solution = mp::PartitionDp(model);
  CHECK(solution.bounds == std::vector<int>{0, 8, 12});  // 8 x 0.5 x 3 ms = 4 x 3 ms
  CHECK(solution.bottleneck_ms == doctest::Approx(12));
}

TEST_CASE("a cut avoids the big tensor") {
  // Equal nodes, but the tensor after node 1 is huge: the best 2-way split
  // moves off the middle to cut where little crosses.
  mp::testing::GraphBuilder b;
  int v = b.Input(1);
  const int64_t sizes[] = {1, 1000000, 1, 1, 1};
  for (int i = 0; i < 5; ++i) v = b.Node("n", {v}, 1, 1, sizes[i]);
  b.Output(b.Node("n", {v}, 1, 1, 1));
  auto costs = mp::ComputeOrderCosts(b.graph, b.profile, mp::PipelineOrder(b.graph), 8, false);
  auto cluster = mp::UniformCluster(2, {}, {1e6, 0.1});
  mp::StageCostModel model(costs, mp::StageSpecs(cluster, mp::ScheduleKind::kForwardOnly, 2, 4), 2.0);
  auto solution = mp::PartitionDp(model);
  CHECK(solution.bounds != std::vector<int>{0, 2, 6});
  CHECK(solution.bounds == std::vector<int>{0, 3, 6});
}

TEST_CASE("infeasible memory names the smallest limit that fits") {
  // Four nodes with 128 MiB of parameters each; training keeps weights,
  // gradients and two Adam moments: 512 MiB a node, 1 GiB a half, and for a
  // moment a node's weight gradient before it is added to .grad (128 MiB).
  auto b = mp::testing::Chain({1, 1, 1, 1}, 0, 128ll << 20);
  auto costs = mp::ComputeOrderCosts(b.graph, b.profile, mp::PipelineOrder(b.graph), 8, true);
  auto cluster = mp::UniformCluster(2, {"gpu", 512ll << 20, 1.0});
  mp::StageCostModel model(costs, mp::StageSpecs(cluster, mp::ScheduleKind::kGPipe, 2, 4), 2.0);
  CHECK_THROWS_WITH_AS(mp::PartitionDp(model),
                       "no partition into 2 stages fits 512 MiB per device; the smallest limit that fits is 1.12 GiB",
                       mp::PlanError);
  CHECK(mp::SmallestMemoryLimit(model) == (1ll << 30) + (128ll << 20));
  cluster.devices[1].memory_bytes = 3ll << 28;
  mp::StageCostModel mixed(costs, mp::StageSpecs(cluster, mp::ScheduleKind::kGPipe, 2, 4), 2.0);
  CHECK_THROWS_WITH_AS(
      mp::PartitionDp(mixed),
      doctest::Contains("the devices' memory (512 MiB, 768 MiB); the smallest limit that fits is 1.12 GiB per device"),
      mp::PlanError);
  // With 5% headroom the stages fit 95% of 512 MiB, and the smallest
  // limit is what leaves 1.12 GiB after it: 1.125 / 0.95 GiB.
  cluster.devices.assign(2, {"gpu", 512ll << 20, 1.0});
  for (mp::Device& d : cluster.devices) d.memory_headroom = 0.05;
  mp::StageCostModel roomy(costs, mp::StageSpecs(cluster, mp::ScheduleKind::kGPipe, 2, 4), 2.0);
  CHECK(roomy.Spec(0).memory_bytes == int64_t(0.95 * double(512ll << 20)));
  CHECK_THROWS_WITH_AS(mp::PartitionDp(roomy),
                       "no partition into 2 stages fits 512 MiB per device (less its 5% headroom); the smallest "
                       "limit that fits is 1.18 GiB",
                       mp::PlanError);
  CHECK(mp::FormatBytes(1406461788) == "1.31 GiB");
  CHECK(mp::FormatBytes(100) == "100 B");
}
