// bench_partition: how fast the partitioner plans. A 10,000-node chain into
// up to 64 stages with the full K x M x schedule search (target < 1 s), and
// a ~1,000-node branchy DAG into 8 stages (target < 50 ms), on synthetic
// profiles with fixed seeds. Prints each figure, its target and the ratio.
#include <cstdio>

#include "bench/best_of.h"
#include "bench/synthetic_graphs.h"
#include "planner/partition/order.h"
#include "planner/partition/partition_dp.h"
#include "planner/partition/search.h"

namespace {

void Report(const char* what, double ms, double target_ms) {
  std::printf("%-58s %10.2f ms  (target %6.0f ms, %5.2fx of it)\n", what, ms, target_ms, ms / target_ms);
}

}  // namespace

int main() {
  {
    auto chain = mp::bench::LongChain(10000);
    mp::PlanRequest request;
    mp::SearchResult result;
    const auto cluster = mp::UniformCluster(64, {"gpu", 80ll << 30, 1.0}, {25e9, 0.01});
    const double ms =
        mp::bench::BestOfMs(2, [&] { result = mp::SearchPlan(chain.graph, chain.profile, cluster, request); });
    std::printf("chain: 10,000 nodes, 64 devices: %zu alternatives; best K=%zu M=%d %s, step %.1f ms, bubble %.3f\n",
                result.alternatives.size(), result.partition.stages.size(), result.partition.microbatches,
                mp::ScheduleName(result.partition.schedule).c_str(), result.predicted.step_ms,
                result.predicted.bubble_fraction);
    Report("chain 10,000 nodes -> <= 64 stages, full K x M x schedule", ms, 1000);

    const auto order = mp::PipelineOrder(chain.graph);
    const auto costs = mp::ComputeOrderCosts(chain.graph, chain.profile, order, 4, true);
    const mp::StageCostModel model(costs, mp::StageSpecs(cluster, mp::ScheduleKind::kOneFOneB, 64, 16), 2.0);
    double bottleneck = 0;
    const double dp_ms = mp::bench::BestOfMs(3, [&] { bottleneck = mp::PartitionDp(model).bottleneck_ms; });
    std::printf("chain: one DP into 64 stages, bottleneck %.3f ms; a plain O(K n^2) DP is %.1e stage evaluations\n",
                bottleneck, 64.0 * 10000.0 * 10000.0 / 2);
    Report("chain 10,000 nodes -> 64 stages, one DP (all K at once)", dp_ms, 1000.0 / 14);
  }
  {
    auto dag = mp::bench::BranchyDag(1000);
    const auto cluster = mp::UniformCluster(8, {"gpu", 80ll << 30, 1.0}, {25e9, 0.01});
    mp::PlanRequest fixed;
    fixed.stages = 8;
    fixed.microbatches = 16;
    fixed.schedule = mp::ScheduleKind::kOneFOneB;
    mp::SearchResult result;
    const double ms = mp::bench::BestOfMs(3, [&] { result = mp::SearchPlan(dag.graph, dag.profile, cluster, fixed); });
    std::printf("dag: %zu nodes into 8 stages (M=16, 1f1b): bottleneck %.2f ms, step %.1f ms\n", dag.graph.nodes.size(),
                result.partition.bottleneck_ms, result.predicted.step_ms);
    Report("DAG ~1,000 nodes -> 8 stages (order, costs, DP, simulate)", ms, 50);
    const double full =
        mp::bench::BestOfMs(3, [&] { result = mp::SearchPlan(dag.graph, dag.profile, cluster, mp::PlanRequest{}); });
    std::printf("dag: full search: %zu alternatives, best K=%zu M=%d %s, step %.1f ms\n", result.alternatives.size(),
                result.partition.stages.size(), result.partition.microbatches,
                mp::ScheduleName(result.partition.schedule).c_str(), result.predicted.step_ms);
    Report("DAG ~1,000 nodes, full K x M x schedule search (<= 8)", full, 50);
    mp::PlanRequest uniform = fixed;
    uniform.method = "uniform";
    auto base = mp::SearchPlan(dag.graph, dag.profile, cluster, uniform);
    std::printf(
        "dag: DP vs uniform at K=8 M=16: bottleneck %.2f vs %.2f ms (%.2fx), step %.1f vs %.1f ms\n",
        mp::SearchPlan(dag.graph, dag.profile, cluster, fixed).partition.bottleneck_ms, base.partition.bottleneck_ms,
        base.partition.bottleneck_ms / mp::SearchPlan(dag.graph, dag.profile, cluster, fixed).partition.bottleneck_ms,
        mp::SearchPlan(dag.graph, dag.profile, cluster, fixed).predicted.step_ms, base.predicted.step_ms);
  }
  return 0;
}
