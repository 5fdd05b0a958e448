// Baselines: uniform counts, balanced parameters, block leveling, the named
// layer split and its errors, and the DP never losing to any of them.
#include <doctest/doctest.h>

#include <random>

#include "common/error.h"
#include "planner/partition/baselines.h"
#include "planner/partition/order.h"
#include "planner/partition/partition.h"
#include "planner/partition/partition_dp.h"
#include "tests/partition/synthetic.h"

using mp::InputError;

namespace {

mp::StageCostModel Model(const mp::OrderCosts& costs, int k, const mp::Cluster& cluster = {}) {
  const auto c = cluster.devices.empty() ? mp::UniformCluster(k, {}) : cluster;
  return mp::StageCostModel(costs, mp::StageSpecs(c, mp::ScheduleKind::kOneFOneB, k, 4), 2.0);
}

// A ResNet-like layer layout: stem, four layers of blocks, root-module ops, fc.
mp::testing::GraphBuilder ResNetLike() {
  mp::testing::GraphBuilder b;
  int v = b.Input(10);
  for (const char* stem : {"conv1", "bn1", "relu", "maxpool"}) v = b.Node(stem, {v}, 1, 1, 10);
  for (int layer = 1; layer <= 4; ++layer) {
    for (int block = 0; block < 2; ++block) {
      const std::string name = "layer" + std::to_string(layer) + "." + std::to_string(block);
      const int in = v;
      v = b.Node(name + ".conv1", {v}, 1, 1, 10);
      v = b.Node(name + ".conv2", {v}, 1, 1, 10);
      v = b.Node("", {v, in}, 0.1, 0.1, 10);  // the residual add lives in the root module
    }
  }
  v = b.Node("", {v}, 0.1, 0.1, 10);  // flatten
  b.Output(b.Node("fc", {v}, 1, 1, 1));
  return b;
}

}  // namespace

TEST_CASE("uniform gives each stage the same number of working nodes") {
  auto b = mp::testing::Chain({5, 1, 1, 1, 1, 1, 1, 1}, 1);
  auto costs = mp::ComputeOrderCosts(b.graph, b.profile, mp::PipelineOrder(b.graph), 8, true);
  CHECK(mp::UniformBounds(Model(costs, 4)) == std::vector<int>{0, 2, 4, 6, 8});
  CHECK(mp::UniformBounds(Model(costs, 3)) == std::vector<int>{0, 2, 5, 8});
  CHECK_THROWS_AS(mp::UniformBounds(Model(costs, 9)), mp::PlanError);
}

TEST_CASE("params balances parameter bytes, block balances time") {
  mp::testing::GraphBuilder b;
  int v = b.Input(1);
  const double ms[] = {4, 1, 1, 1, 1, 1, 1, 4};
  const int64_t params[] = {0, 0, 0, 0, 0, 0, 100, 100};  // a heavy head, like a classifier
  for (int i = 0; i < 8; ++i) v = b.Node("n", {v}, ms[i], ms[i], 1, params[i]);
  b.Output(v);
  auto costs = mp::ComputeOrderCosts(b.graph, b.profile, mp::PipelineOrder(b.graph), 8, true);
  auto by_params = mp::ParamBounds(Model(costs, 2));
  CHECK(by_params[1] == 7);  // the two parameter-heavy nodes split apart
  auto block = mp::BlockBounds(Model(costs, 2));
  CHECK(block == std::vector<int>{0, 4, 8});  // 7 + 7 of compute
  auto three = mp::BlockBounds(Model(costs, 3));
  const auto m3 = Model(costs, 3);
  double worst = 0;
  for (int s = 0; s < 3; ++s) worst = std::max(worst, m3.ComputeMs(s, three[s], three[s + 1]));
  CHECK(worst == doctest::Approx(10));  // {4,1} {1,1,1,1,1} {1,4} x (forward + backward)
}

TEST_CASE("named layer split: the tutorial's ResNet-50 split") {
  auto b = ResNetLike();
  const auto order = mp::PipelineOrder(b.graph);
  auto groups = mp::ParseLayerSplit("layer1,layer2 | layer3,layer4,fc");
  REQUIRE(groups.size() == 2);
  CHECK(groups[1] == std::vector<std::string>{"layer3", "layer4", "fc"});
  auto bounds = mp::LayerSplitBounds(b.graph, order, groups);
  REQUIRE(bounds.size() == 3);
  // Stem and the root-module adds go with their neighbours: stage 1 starts
  // at layer3.0.conv1.
  CHECK(b.graph.nodes[order[bounds[1]]].layer == "layer3.0.conv1");
  CHECK(b.graph.nodes[order[bounds[1] - 1]].layer == "");
  CHECK(b.graph.nodes[order[0]].layer == "conv1");
  // Dotted names match on dot boundaries only.
  auto fine = mp::LayerSplitBounds(b.graph, order, mp::ParseLayerSplit("layer1 | layer2.0 | layer2.1, layer3, layer4, fc"));
  CHECK(b.graph.nodes[order[fine[2]]].layer == "layer2.1.conv1");
}

TEST_CASE("named layer split: a layer's constant late in pipeline order does not break its group") {
  // The CIFAR ConvNet's split conv1 | conv2 | fc | out, where pipeline order
  // put a constant of conv1's after out.
  mp::testing::GraphBuilder b;
  int v = b.Input(10);
  for (const char* layer : {"conv1.0", "conv2.0", "fc.1", "out.0"}) v = b.Node(layer, {v}, 1, 1, 10);
  b.Output(v);
  b.Constant("conv1.0");  // node 4
  const std::vector<int> order = {0, 1, 2, 3, 4};
  const auto bounds = mp::LayerSplitBounds(b.graph, order, mp::ParseLayerSplit("conv1 | conv2 | fc | out"));
  CHECK(bounds == std::vector<int>{0, 1, 2, 3, 5});
}

TEST_CASE("named layer split errors name the layer") {
  auto b = ResNetLike();
  const auto order = mp::PipelineOrder(b.graph);
  auto split = [&](const std::string& text) { return mp::LayerSplitBounds(b.graph, order, mp::ParseLayerSplit(text)); };
  CHECK_THROWS_WITH_AS(split("layer1 | layer9"), doctest::Contains("layer 'layer9' matches no node"), InputError);
  CHECK_THROWS_WITH_AS(split("layer1 | layer"), doctest::Contains("layer 'layer' matches no node"), InputError);
  CHECK_THROWS_WITH_AS(split("layer1,layer2 | layer2,layer3"),
                       doctest::Contains("layer 'layer2' is in group 1 and group 2"), InputError);
  CHECK_THROWS_WITH_AS(split("layer3 | layer1,layer2"), doctest::Contains("layer 'layer3' (group 1) is not contiguous: node 16 (layer3.0.conv1) comes after layer 'layer2' of group 2"),
                       InputError);
  CHECK_THROWS_WITH_AS(split("layer1,layer3 | layer2"), doctest::Contains("layer 'layer3' (group 1) is not contiguous"), InputError);
  CHECK_THROWS_WITH_AS(mp::ParseLayerSplit("layer1 || layer2"), doctest::Contains("group 2 is empty"), InputError);
  CHECK_THROWS_WITH_AS(mp::ParseLayerSplit("layer1, | layer2"), doctest::Contains("empty layer name in group 1"),
                       InputError);
}

TEST_CASE("the DP is never worse than any baseline on random DAGs") {
  std::mt19937 rng(11);
  int strictly_better = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int n = std::uniform_int_distribution<int>(4, 60)(rng);
    auto b = mp::testing::RandomDag(rng, n);
    auto costs = mp::ComputeOrderCosts(b.graph, b.profile, mp::PipelineOrder(b.graph), 8, trial % 2 == 0);
    const int k = std::uniform_int_distribution<int>(2, 4)(rng);
    mp::Cluster cluster = mp::UniformCluster(k, {}, {1e6 * (1 + trial % 5), 0.05});
    if (trial % 3 == 0) cluster.devices[0].speed = 0.5;
    const auto model = Model(costs, k, cluster);
    const double dp = mp::PartitionDp(model).bottleneck_ms;
    for (const auto& bounds : {mp::UniformBounds(model), mp::ParamBounds(model), mp::BlockBounds(model)}) {
      auto p = mp::MakePartition(model, bounds, "baseline", mp::ScheduleKind::kOneFOneB, 4);
      CHECK(dp <= p.bottleneck_ms + 1e-9);
      strictly_better += dp < p.bottleneck_ms - 1e-9;
    }
  }
  CHECK(strictly_better > 500);
}
