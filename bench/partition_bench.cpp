// bench_partition: how fast the partitioner plans. A 10,000-node chain into
// up to 64 stages with the full K x M x schedule search (target < 1 s), and
// a ~1,000-node branchy DAG into 8 stages (target < 50 ms), on synthetic
// profiles with fixed seeds. Prints each figure, its target and the ratio.
#include <chrono>
#include <cstdio>
#include <random>

#include "planner/partition/order.h"
#include "planner/partition/partition_dp.h"
#include "planner/partition/search.h"
#include "tests/partition/synthetic.h"

namespace {

const std::vector<int64_t> kSizes = {1, 2, 4, 8, 16, 32, 64};

template <typename F>
double TimeMs(F&& f, int repeats = 3) {
  double best = 1e300;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

void Report(const char* what, double ms, double target_ms) {
  std::printf("%-58s %10.2f ms  (target %6.0f ms, %5.2fx of it)\n", what, ms, target_ms, ms / target_ms);
}

mp::testing::GraphBuilder LongChain(int n) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> ms(0.5, 1.5);
  mp::testing::GraphBuilder b(kSizes);
  int v = b.Input(4096);
  for (int i = 0; i < n; ++i) v = b.Node("block" + std::to_string(i / 100), {v}, ms(rng), 2 * ms(rng), 4096, 65536);
  b.Output(v);
  return b;
}

// Residual blocks with an occasional long skip (DenseNet-like concatenation).
mp::testing::GraphBuilder Branchy(int n) {
  std::mt19937 rng(2);
  std::uniform_real_distribution<double> ms(0.1, 2.0);
  mp::testing::GraphBuilder b(kSizes);
  int v = b.Input(4096);
  int block_in = v, far = v;
  for (int i = 0; (int)b.graph.nodes.size() < n; ++i) {
    const int left = b.Node("l", {v}, ms(rng), 2 * ms(rng), 8192, 16384);
    const int right = b.Node("r", {block_in}, ms(rng), 2 * ms(rng), 8192, 16384);
    v = b.Node("join", {left, right}, 0.05, 0.1, 8192);
    if (i % 10 == 9) {
      v = b.Node("concat", {v, far}, 0.1, 0.2, 16384);
      far = v;
    }
    block_in = v;
  }
  b.Output(v);
  return b;
}

}  // namespace

int main() {
  {
    auto chain = LongChain(10000);
    mp::PlanRequest request;
    mp::SearchResult result;
    const auto cluster = mp::UniformCluster(64, {"gpu", 80ll << 30, 1.0}, {25e9, 0.01});
    const double ms = TimeMs([&] { result = mp::SearchPlan(chain.graph, chain.profile, cluster, request); }, 2);
    std::printf("chain: 10,000 nodes, 64 devices: %zu alternatives; best K=%zu M=%d %s, step %.1f ms, bubble %.3f\n",
                result.alternatives.size(), result.partition.stages.size(), result.partition.microbatches,
                mp::ScheduleName(result.partition.schedule).c_str(), result.predicted.step_ms,
                result.predicted.bubble_fraction);
    Report("chain 10,000 nodes -> <= 64 stages, full K x M x schedule", ms, 1000);

    const auto order = mp::PipelineOrder(chain.graph);
    const auto costs = mp::ComputeOrderCosts(chain.graph, chain.profile, order, 4, true);
    const mp::StageCostModel model(costs, mp::StageSpecs(cluster, mp::ScheduleKind::kOneFOneB, 64, 16), 2.0);
    double bottleneck = 0;
    const double dp_ms = TimeMs([&] { bottleneck = mp::PartitionDp(model).bottleneck_ms; });
    std::printf("chain: one DP into 64 stages, bottleneck %.3f ms; a plain O(K n^2) DP is %.1e stage evaluations\n",
                bottleneck, 64.0 * 10000.0 * 10000.0 / 2);
    Report("chain 10,000 nodes -> 64 stages, one DP (all K at once)", dp_ms, 1000.0 / 14);
  }
  {
    auto dag = Branchy(1000);
    const auto cluster = mp::UniformCluster(8, {"gpu", 80ll << 30, 1.0}, {25e9, 0.01});
    mp::PlanRequest fixed;
    fixed.stages = 8;
    fixed.microbatches = 16;
    fixed.schedule = mp::ScheduleKind::kOneFOneB;
    mp::SearchResult result;
    const double ms = TimeMs([&] { result = mp::SearchPlan(dag.graph, dag.profile, cluster, fixed); });
    std::printf("dag: %zu nodes into 8 stages (M=16, 1f1b): bottleneck %.2f ms, step %.1f ms\n",
                dag.graph.nodes.size(), result.partition.bottleneck_ms, result.predicted.step_ms);
    Report("DAG ~1,000 nodes -> 8 stages (order, costs, DP, simulate)", ms, 50);
    const double full = TimeMs([&] { result = mp::SearchPlan(dag.graph, dag.profile, cluster, mp::PlanRequest{}); });
    std::printf("dag: full search: %zu alternatives, best K=%zu M=%d %s, step %.1f ms\n", result.alternatives.size(),
                result.partition.stages.size(), result.partition.microbatches,
                mp::ScheduleName(result.partition.schedule).c_str(), result.predicted.step_ms);
    Report("DAG ~1,000 nodes, full K x M x schedule search (<= 8)", full, 50);
    mp::PlanRequest uniform = fixed;
    uniform.method = "uniform";
    auto base = mp::SearchPlan(dag.graph, dag.profile, cluster, uniform);
    std::printf("dag: DP vs uniform at K=8 M=16: bottleneck %.2f vs %.2f ms (%.2fx), step %.1f vs %.1f ms\n",
                mp::SearchPlan(dag.graph, dag.profile, cluster, fixed).partition.bottleneck_ms,
                base.partition.bottleneck_ms,
                base.partition.bottleneck_ms / mp::SearchPlan(dag.graph, dag.profile, cluster, fixed).partition.bottleneck_ms,
                mp::SearchPlan(dag.graph, dag.profile, cluster, fixed).predicted.step_ms, base.predicted.step_ms);
  }
  return 0;
}
