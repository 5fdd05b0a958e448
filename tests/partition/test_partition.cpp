// Partitions: a moved bound makes what MakePartition makes of the new
// bounds; the search's step times on a shape's split lists equal the
// simulation of the partition's own lists; listing fills the nodes.
#include <doctest/doctest.h>

#include <random>

#include "common/error.h"
#include "planner/partition/order.h"
#include "planner/partition/partition.h"
#include "tests/partition/synthetic.h"

using mp::ScheduleKind;

namespace {

// Every field a stage's simulation, memory or row reads.
void CheckSameStage(const mp::Stage& a, const mp::Stage& b) {
  CHECK(a.index == b.index);
  CHECK(a.device == b.device);
  CHECK(a.forward_ms == b.forward_ms);
  CHECK(a.backward_ms == b.backward_ms);
  CHECK(a.input_backward_ms == b.input_backward_ms);
  CHECK(a.weight_backward_ms == b.weight_backward_ms);
  CHECK(a.recompute_ms == b.recompute_ms);
  CHECK(a.cost_ms == b.cost_ms);
  CHECK(a.transfer_ms == b.transfer_ms);
  CHECK(a.allreduce_ms == b.allreduce_ms);
  CHECK(a.optimizer_ms == b.optimizer_ms);
  CHECK(a.param_bytes == b.param_bytes);
  CHECK(a.gradient_bytes == b.gradient_bytes);
  CHECK(a.static_bytes == b.static_bytes);
  CHECK(a.activation_bytes == b.activation_bytes);
  CHECK(a.transient_bytes == b.transient_bytes);
  CHECK(a.weight_transient_bytes == b.weight_transient_bytes);
  CHECK(a.weight_gradient_bytes == b.weight_gradient_bytes);
  CHECK(a.freed_by_i_bytes == b.freed_by_i_bytes);
  CHECK(a.peak_memory_bytes == b.peak_memory_bytes);
  CHECK(a.fits == b.fits);
  CHECK(a.whole_backward == b.whole_backward);
}

}  // namespace

TEST_CASE("a moved bound makes what MakePartition makes of the new bounds, the stages that ran B running B") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    CAPTURE(trial);
    auto b = mp::testing::RandomDag(rng, 30);
    const auto costs = mp::ComputeOrderCosts(b.graph, b.profile, mp::PipelineOrder(b.graph), 8, true);
    const ScheduleKind kind = trial % 2 ? ScheduleKind::kZeroBubbleH1 : ScheduleKind::kOneFOneB;
    const mp::Cluster cluster = mp::UniformCluster(4, {"gpu", trial % 3 ? mp::kUnlimitedMemory : 200000, 1.0},
                                                   {1e6, 0.05});
    const mp::StageCostModel model(costs, mp::StageSpecs(cluster, kind, 4, 6), 2.0);
    std::vector<int> bounds = {0, 7, 15, 22, model.Positions()};
    mp::Partition p = mp::MakePartition(model, bounds, "dp", kind, 6, false);
    if (mp::SplitsBackward(kind)) mp::RunWhole(p, size_t(trial % 4));
    for (size_t i = 1; i + 1 < bounds.size(); ++i) {
      for (int to : {bounds[i] - 1, bounds[i] + 2}) {
        CAPTURE(i);
        CAPTURE(to);
        const mp::Partition moved = mp::MoveBound(model, p, i, to);
        std::vector<int> now = bounds;
        now[i] = to;
        mp::Partition made = mp::MakePartition(model, now, "dp", kind, 6, false);
        for (size_t s = 0; s < p.stages.size(); ++s) {
          if (p.stages[s].whole_backward) mp::RunWhole(made, s);
        }
        CHECK(moved.bounds == made.bounds);
        REQUIRE(moved.stages.size() == made.stages.size());
        for (size_t s = 0; s < made.stages.size(); ++s) CheckSameStage(moved.stages[s], made.stages[s]);
        REQUIRE(moved.transfers.size() == made.transfers.size());
        for (size_t t = 0; t < made.transfers.size(); ++t) {
          CHECK(moved.transfers[t].forward_ms == made.transfers[t].forward_ms);
          CHECK(moved.transfers[t].backward_ms == made.transfers[t].backward_ms);
        }
        CHECK(moved.bottleneck_ms == made.bottleneck_ms);
        CHECK(moved.fits == made.fits);
        CHECK(moved.cut.empty());
      }
    }
    mp::ListStages(p, costs);
    CHECK_THROWS_AS(mp::MoveBound(model, p, 1, 6), mp::InternalError);
  }
}

TEST_CASE("step times on a shape's split lists equal the simulation of the partition's own lists") {
  std::mt19937 rng(11);
  for (const ScheduleKind kind : {ScheduleKind::kOneFOneB, ScheduleKind::kZeroBubbleH1, ScheduleKind::kZeroBubbleV,
                                  ScheduleKind::kDualPipeV}) {
    CAPTURE(mp::ScheduleName(kind));
    const int chunks = mp::ChunksFor(kind, 0), devices = 3, stages = devices * chunks, m = 6;
    auto b = mp::testing::RandomDag(rng, 40);
    const auto costs = mp::ComputeOrderCosts(b.graph, b.profile, mp::PipelineOrder(b.graph), 8, true);
    mp::Cluster cluster = mp::UniformCluster(devices, {}, {1e6, 0.05});
    cluster.shared_slowdown = {1.0, 1.2, 1.5};  // contention: the rounds replay the same lists
    const mp::StageCostModel model(costs, mp::StageSpecs(cluster, kind, stages, m, chunks), 2.0);
    std::vector<int> bounds;
    for (int s = 0; s <= stages; ++s) bounds.push_back(s * model.Positions() / stages);
    const mp::Schedule lists = mp::BuildSchedule(kind, devices, m, chunks);
    const mp::ReplayOrder order = mp::OrderForReplay(lists);
    for (int whole = 0; whole < (mp::SplitsBackward(kind) ? 1 << stages : 1); whole += 5) {
      CAPTURE(whole);
      mp::Partition p = mp::MakePartition(model, bounds, "dp", kind, m, false, chunks);
      for (int s = 0; s < stages; ++s) {
        if (whole & (1 << s)) mp::RunWhole(p, size_t(s));
      }
      const mp::SimResult own = mp::SimulatePartition(p, mp::PartitionSchedule(p));
      const mp::SimResult split = mp::PartitionStepTimes(p, lists, order);
      CHECK(split.step_ms == own.step_ms);
      CHECK(split.bubble_fraction == own.bubble_fraction);
      CHECK(split.busy_ms == own.busy_ms);
    }
  }
}

TEST_CASE("an unlisted partition has no nodes, and listing gives each stage its slice of the order") {
  auto b = mp::testing::Chain({1, 2, 3, 4, 5, 6}, 10);
  const auto costs = mp::ComputeOrderCosts(b.graph, b.profile, mp::PipelineOrder(b.graph), 8, true);
  const mp::StageCostModel model(costs, mp::StageSpecs(mp::UniformCluster(2, {}), ScheduleKind::kOneFOneB, 2, 4),
                                 2.0);
  mp::Partition p = mp::MakePartition(model, {0, 3, model.Positions()}, "dp", ScheduleKind::kOneFOneB, 4, false);
  CHECK(p.order.empty());
  CHECK(p.stages[0].nodes.empty());
  CHECK(p.stages[1].receives.empty());
  mp::ListStages(p, costs);
  CHECK(p.order == costs.order);
  CHECK(p.stages[0].nodes == std::vector<int>(costs.order.begin(), costs.order.begin() + 3));
  CHECK(p.stages[1].nodes == std::vector<int>(costs.order.begin() + 3, costs.order.end()));
  CHECK(!p.stages[1].receives.empty());
  CHECK(p.stages[0].sends.size() == p.stages[1].receives.size());
}
