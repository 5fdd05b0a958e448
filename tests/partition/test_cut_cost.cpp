// Pipeline order and cut costs: liveness across cuts (skip connections,
// model inputs, parameters, constants, gradients), branch-contiguous order,
// and in-place writes kept in place.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <random>

#include "common/error.h"
#include "planner/graph/gradient_free.h"
#include "planner/graph/saved_values.h"
#include "planner/partition/cut_cost.h"
#include "planner/partition/order.h"
#include "planner/partition/stage_cost.h"
#include "tests/partition/synthetic.h"

using mp::testing::GraphBuilder;

namespace {

std::vector<int> Identity(int n) {
  std::vector<int> order(n);
  for (int i = 0; i < n; ++i) order[i] = i;
  return order;
}

bool RespectsEdges(const mp::OpGraph& graph, const std::vector<int>& order) {
  std::vector<int> pos(order.size());
  for (size_t p = 0; p < order.size(); ++p) pos[order[p]] = int(p);
  auto dag = mp::MakeOrderingDag(graph);
  for (auto [e, end] = boost::edges(dag); e != end; ++e) {
    if (pos[boost::source(*e, dag)] >= pos[boost::target(*e, dag)]) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("cut bytes by liveness: neighbours, skips, inputs, params, constants") {
  GraphBuilder b({8});
  const int x = b.Input(10);                       // read by nodes 0 and 2
  const int c = b.Constant();                      // node 0: cloned, never sent
  const int a = b.Node("a", {x, c}, 1, 2, 100, 4000);  // node 1, params 4000
  const int d = b.Node("b", {a, x}, 1, 2, 1000);   // node 2
  const int e = b.Node("c", {d, c}, 1, 2, 10000);  // node 3
  const int f = b.Node("d", {e, a}, 1, 2, 7, 0, false, "int64");  // node 4: skip from a
  const int g = b.Node("e", {f}, 1, 2, 3);         // node 5
  b.Output(g);
  auto costs = mp::ComputeOrderCosts(b.graph, b.profile, Identity(6), 8, true);
  // Bytes at micro-batch 8: x 80, a 800, d 8000, e 80000, f 56.
  CHECK(costs.cut_bytes == std::vector<int64_t>{0, 0, 80 + 800, 800 + 8000, 800 + 80000, 56, 0});
  // Gradients: never for the model input x, nor for the int64 value f.
  CHECK(costs.cut_grad_bytes == std::vector<int64_t>{0, 0, 800, 800 + 8000, 800 + 80000, 0, 0});
  CHECK(costs.param_bytes == std::vector<int64_t>{0, 4000, 0, 0, 0, 0});
  CHECK(costs.output_bytes == std::vector<int64_t>{0, 800, 8000, 80000, 56, 24});
  CHECK(costs.forward_ms[1] == doctest::Approx(1));
  CHECK(costs.backward_ms[1] == doctest::Approx(2));
  CHECK_FALSE(costs.Useful(0));
  auto across = mp::ValuesAcrossCut(costs, 4);
  REQUIRE(across.size() == 2);
  CHECK(across[0].value == a);
  CHECK(across[1].value == e);
  CHECK(across[0].carries_gradient);
  // Inference: no gradients, no backward times.
  auto infer = mp::ComputeOrderCosts(b.graph, b.profile, Identity(6), 8, false);
  CHECK(infer.cut_grad_bytes == std::vector<int64_t>(7, 0));
  CHECK(infer.backward_ms[3] == 0);
}

TEST_CASE("the attention twin keeps its weights, their dropout noise and the weights dropped") {
  // LibTorch 2.x's attention with dropout runs as mp::scaled_dot_product_attention,
  // a composite: [2, 4, 16, 8] queries over 32 keys keep three [2, 4, 16, 32]
  // float tensors beside q, k and v, 3 x 32 / 8 = 12 times the output.
  mp::testing::GraphBuilder b;
  const int q = b.Input(4 * 16 * 8 * 4), k = b.Input(4 * 32 * 8 * 4), v = b.Input(4 * 32 * 8 * 4);
  b.graph.values[q].shape = {2, 4, 16, 8};
  b.graph.values[k].shape = {2, 4, 32, 8};
  b.graph.values[v].shape = {2, 4, 32, 8};
  const int out = b.Node("attn", {q, k, v}, 1, 1, 4 * 16 * 8 * 4);
  b.graph.nodes[b.graph.values[out].producer].kind = "mp::scaled_dot_product_attention";
  b.Output(out);
  mp::MarkSavedValues(b.graph);
  CHECK(b.graph.nodes[b.graph.values[out].producer].kept_extra == doctest::Approx(12));
  // Without shapes (a graph built before the probe), nothing is guessed.
  b.graph.values[k].shape.clear();
  mp::MarkSavedValues(b.graph);
  CHECK(b.graph.nodes[b.graph.values[out].producer].kept_extra == 0);
}

TEST_CASE("training keeps what gradients need: a linear its input, a relu its output, add and views nothing") {
  mp::testing::GraphBuilder b;
  const auto kind = [&](int value, const char* k) { b.graph.nodes[b.graph.values[value].producer].kind = k; };
  const int x = b.Input(100);
  const int h = b.Node("fc", {x}, 1, 1, 100, 4000);
  kind(h, "aten::linear");  // keeps x (a model input: the first stage's to hold, not the node's)
  const int r = b.Node("act", {h}, 1, 1, 100);
  kind(r, "aten::relu");  // keeps r; h is freed once relu has run
  const int v = b.Node("act", {r}, 0, 0, 100);
  kind(v, "aten::view");  // r's storage
  const int scale = b.Constant();
  b.graph.values[scale].type = "float";
  const int m = b.Node("scale", {v, scale}, 1, 1, 100);
  kind(m, "aten::mul");  // by a scalar: keeps nothing
  const int a = b.Node("res", {m, x}, 1, 1, 100);
  kind(a, "aten::add");
  const int p = b.Node("pool", {a}, 1, 1, 50);
  kind(p, "aten::max_pool2d");  // keeps a, and int64 indices twice its float output
  b.Output(p);
  mp::MarkSavedValues(b.graph);
  const auto kept = [&](int value) { return b.graph.values[value].kept_for_backward; };
  CHECK(kept(x));
  CHECK_FALSE(kept(h));
  CHECK(kept(r));
  CHECK_FALSE(kept(v));
  CHECK(b.graph.values[v].alias);
  CHECK_FALSE(kept(m));
  CHECK(kept(a));
  CHECK_FALSE(kept(p));

  const auto order = mp::PipelineOrder(b.graph);
  const auto costs = mp::ComputeOrderCosts(b.graph, b.profile, order, 8, true);
  std::map<int, int64_t> by_node;
  for (int q = 0; q < costs.Positions(); ++q) by_node[order[q]] = costs.kept_bytes[q];
  CHECK(by_node[b.graph.values[h].producer] == 0);
  CHECK(by_node[b.graph.values[r].producer] == 800);
  CHECK(by_node[b.graph.values[v].producer] == 0);
  CHECK(by_node[b.graph.values[m].producer] == 0);
  CHECK(by_node[b.graph.values[a].producer] == 800);
  CHECK(by_node[b.graph.values[p].producer] == 800);  // indices: 2 x 400
  // One stage holds 2400 bytes a micro-batch (every output would be 4400),
  // and the pool's output that the loss keeps (400), and once the most its
  // backward adds: the gradient the loss makes of the pool's output (400)
  // and, at fc, its weight gradient and its input's (estimated as its
  // output's, 4000 + 800) with its output's gradient (800), less what the
  // nodes after it kept (2400), freed by then.
  const mp::StageCostModel model(costs, mp::StageSpecs(mp::UniformCluster(1, {}), mp::ScheduleKind::kGPipe, 1, 2),
                                 2.0);
  CHECK(costs.loss_kept_bytes == 400);
  CHECK(model.ActivationBytes(0, costs.Positions()) == 2400 + 400);
  const int n = costs.Positions();
  CHECK(model.TransientBytes(0, n, false) == 400 + 4000 + 2 * 800 - 2400);
  CHECK(model.MemoryBytes(0, 0, n) == 4 * 4000 + 2 * 2800 + 3600);
  // The first stage's I has nothing to do: its W is a whole backward.
  CHECK(model.TransientBytes(0, n, true) == model.TransientBytes(0, n, false));
  // From relu on, a whole backward is at its most at the add (its input's
  // gradient and its output's, 800 each; then only the pool's indices and
  // the add's output, which the pool keeps, are held of what the stage's
  // nodes kept); a split backward's I frees nothing as it goes and is at
  // its most at relu (its input's gradient and its output's).
  CHECK(model.TransientBytes(1, n, false) == 400 + 2 * 800 - (2400 - 1600));
  CHECK(model.TransientBytes(1, n, true) == 400 + 2 * 800);
}

TEST_CASE("a split backward's I keeps, for W, the gradient at each node that reads a weight") {
  // Three nodes, each reading 4000 bytes of weights, 100 bytes a sample out.
  auto b = mp::testing::Chain({1, 1, 1}, 100, 4000);
  const auto costs = mp::ComputeOrderCosts(b.graph, b.profile, mp::PipelineOrder(b.graph), 8, true);
  const mp::StageCostModel zb(costs, mp::StageSpecs(mp::UniformCluster(2, {}), mp::ScheduleKind::kZeroBubbleH1, 2, 2),
                              2.0);
  CHECK(zb.Spec(1).split_backward);
  // The first stage's inputs take no gradient: its I has nothing to do, its
  // W runs the whole backward, and nothing waits between them.
  CHECK(zb.WeightGradientBytes(0, 1) == 0);
  CHECK(zb.WeightGradientBytes(1, 3) == 2 * 800);
  // Its W holds one node's weights' gradients at a time; the first stage's
  // W is a whole backward.
  CHECK(zb.WeightTransientBytes(1, 3) == 4000);
  CHECK(zb.WeightTransientBytes(0, 1) == zb.TransientBytes(0, 1, false));
  const int64_t without = zb.StaticBytes(1, 3) + zb.Spec(1).in_flight * zb.ActivationBytes(1, 3) +
                          std::max(zb.TransientBytes(1, 3, true), zb.WeightTransientBytes(1, 3));
  CHECK(zb.MemoryBytes(1, 1, 3) == without + zb.Spec(1).in_flight * 1600);
  const mp::StageCostModel onef(costs, mp::StageSpecs(mp::UniformCluster(2, {}), mp::ScheduleKind::kOneFOneB, 2, 2),
                                2.0);
  CHECK_FALSE(onef.Spec(1).split_backward);
  CHECK(onef.MemoryBytes(1, 1, 3) == onef.StaticBytes(1, 3) + onef.Spec(1).in_flight * onef.ActivationBytes(1, 3) +
                                          onef.TransientBytes(1, 3, false));
}

TEST_CASE("each micro-batch after a step's first pays for adding its parameter gradients into .grad") {
  // Three nodes, each reading 1 MiB of weights; the profile has them at 8.
  auto b = mp::testing::Chain({1, 1, 1}, 100, 1 << 20);
  b.profile.batch = 32;
  const auto plain = mp::ComputeOrderCosts(b.graph, b.profile, Identity(3), 8, true);
  b.profile.accumulate_ms_per_mib = 0.25;
  const auto charged = mp::ComputeOrderCosts(b.graph, b.profile, Identity(3), 8, true);
  // 4 micro-batches: 3 of them add, so each pays 3/4 of 0.25 ms, in B and in W.
  for (int p = 0; p < 3; ++p) {
    CHECK(charged.backward_ms[p] == doctest::Approx(plain.backward_ms[p] + 0.1875));
    CHECK(charged.weight_backward_ms[p] == doctest::Approx(plain.weight_backward_ms[p] + 0.1875));
    CHECK(charged.forward_ms[p] == plain.forward_ms[p]);
  }
  // One micro-batch a step: its gradients become .grad, nothing is added.
  b.profile.batch = 8;
  const auto one = mp::ComputeOrderCosts(b.graph, b.profile, Identity(3), 8, true);
  CHECK(one.backward_ms[0] == plain.backward_ms[0]);
}

TEST_CASE("frozen layers: no gradient crosses their cuts, and their weights hold no gradient or optimizer state") {
  // Four layers of 1 MiB weights, the first two frozen (a fine-tuned
  // backbone): what they make takes no gradient until the third.
  auto b = mp::testing::Chain({1, 1, 1, 1}, 100, 1 << 20);
  b.profile.batch = 32;
  b.profile.accumulate_ms_per_mib = 0.25;
  for (int p : {b.graph.params[0], b.graph.params[1]}) b.graph.values[p].frozen = true;
  mp::MarkGradientFree(b.graph, {});
  const auto costs = mp::ComputeOrderCosts(b.graph, b.profile, Identity(4), 8, true);
  CHECK(costs.param_bytes == std::vector<int64_t>(4, 1 << 20));
  CHECK(costs.gradient_bytes == std::vector<int64_t>{0, 0, 1 << 20, 1 << 20});
  CHECK(costs.cut_grad_bytes == std::vector<int64_t>{0, 0, 0, 800, 0});  // only after the third layer
  CHECK(costs.backward_ms[0] == doctest::Approx(2));                     // no .grad to add into
  CHECK(costs.backward_ms[2] == doctest::Approx(2 + 0.1875));
  const mp::StageCostModel model(costs, mp::StageSpecs(mp::UniformCluster(2, {}), mp::ScheduleKind::kOneFOneB, 2, 4), 2.0);
  CHECK(model.StaticBytes(0, 2) == 2 << 20);                // the frozen weights alone
  CHECK(model.StaticBytes(2, 4) == 2 * (1 << 20) * (1 + 1 + 2));  // weights, gradients, 2 optimizer tensors
  // A write into a frozen layer's output from a layer that takes a
  // gradient makes it take one (`buf[:, 0] = linear(x)`); a batch norm's
  // running statistics written from its input do not.
  auto w = mp::testing::Chain({1, 1, 1}, 100, 1 << 20);
  w.graph.values[w.graph.params[0]].frozen = true;
  const int first = w.graph.nodes[0].outputs[0];
  mp::MarkGradientFree(w.graph, {{first, 2, true}});
  CHECK(w.graph.values[first].gradient_free);
  mp::MarkGradientFree(w.graph, {{first, 2, false}});
  CHECK_FALSE(w.graph.values[first].gradient_free);
}

TEST_CASE("cut costs scale with the micro-batch size and need a profiled size") {
  auto b = mp::testing::Chain({1, 1, 1}, 10, 0, {2, 8});
  auto costs = mp::ComputeOrderCosts(b.graph, b.profile, Identity(3), 4, true);
  CHECK(costs.cut_bytes[1] == 40);
  CHECK(costs.forward_ms[0] == doctest::Approx(0.5));
  CHECK_THROWS_AS(mp::ComputeOrderCosts(b.graph, b.profile, Identity(3), 16, true), mp::PlanError);
  auto wrong = b.profile;
  wrong.values.pop_back();
  CHECK_THROWS_WITH_AS(mp::ComputeOrderCosts(b.graph, wrong, Identity(3), 4, true),
                       doctest::Contains("3 values; the graph has 3 and 4"), mp::InputError);
  wrong = b.profile;
  wrong.fingerprint = "abc";
  b.graph.fingerprint = "def";
  CHECK_THROWS_WITH_AS(mp::ComputeOrderCosts(b.graph, wrong, Identity(3), 4, true),
                       doctest::Contains("fingerprint abc"), mp::InputError);
}

TEST_CASE("pipeline order keeps branches contiguous and joins right after them") {
  // Canonical order interleaves two branches: l0 r0 l1 r1 l2 r2, then join.
  GraphBuilder b;
  const int x = b.Input(1);
  const int stem = b.Node("stem", {x}, 1, 1, 1);
  int l = stem, r = stem;
  for (int i = 0; i < 3; ++i) {
    l = b.Node("left", {l}, 1, 1, 1000);
    r = b.Node("right", {r}, 1, 1, 1000);
  }
  const int join = b.Node("join", {l, r}, 1, 1, 1);
  b.Output(b.Node("head", {join}, 1, 1, 1));
  auto order = mp::PipelineOrder(b.graph);
  CHECK(order == std::vector<int>{0, 1, 3, 5, 2, 4, 6, 7, 8});
  CHECK(RespectsEdges(b.graph, order));
  // Interleaved, every cut inside the branches carries both; grouped, one
  // cut in the middle carries the two branch ends and the others carry one.
  auto canonical = mp::ComputeOrderCosts(b.graph, b.profile, Identity(9), 8, false);
  auto grouped = mp::ComputeOrderCosts(b.graph, b.profile, order, 8, false);
  int64_t canonical_total = 0, grouped_total = 0;
  for (int i = 0; i <= 9; ++i) {
    canonical_total += canonical.cut_bytes[i];
    grouped_total += grouped.cut_bytes[i];
  }
  CHECK(grouped_total < canonical_total);
}

TEST_CASE("a source is placed right before the node that needs it") {
  GraphBuilder b;
  const int x = b.Input(1);
  const int late = b.Node("table", {}, 1, 1, 500);  // node 0: reads only a parameter
  int v = x;
  for (int i = 0; i < 4; ++i) v = b.Node("body", {v}, 1, 1, 1);
  b.Output(b.Node("head", {v, late}, 1, 1, 1));
  auto order = mp::PipelineOrder(b.graph);
  CHECK(order == std::vector<int>{1, 2, 3, 4, 0, 5});
}

TEST_CASE("an in-place write never moves across a reader of its input") {
  // n1 reads x; n2 writes x in place (relu_); the join reads n2 first, so a
  // data-only demand order would emit n2 before n1.
  GraphBuilder b;
  const int in = b.Input(1);
  const int x = b.Node("x", {in}, 1, 1, 10);                    // node 0
  const int reader = b.Node("reader", {x}, 1, 1, 10);           // node 1
  const int writer = b.Node("relu_", {x}, 1, 1, 10, 0, true);   // node 2
  const int after = b.Node("after", {x}, 1, 1, 10);             // node 3: reads the written x
  b.Output(b.Node("join", {writer, after, reader}, 1, 1, 1));
  auto order = mp::PipelineOrder(b.graph);
  std::vector<int> pos(order.size());
  for (size_t p = 0; p < order.size(); ++p) pos[order[p]] = int(p);
  CHECK(pos[1] < pos[2]);
  CHECK(pos[2] < pos[3]);
  CHECK(RespectsEdges(b.graph, order));
  auto dag = mp::MakeOrderingDag(b.graph);
  CHECK(boost::edge(1, 2, dag).second);
  CHECK(boost::edge(2, 3, dag).second);
}

TEST_CASE("the pipeline order is topological on random DAGs with writes") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    auto b = mp::testing::RandomDag(rng, 1 + trial % 40);
    for (auto& node : b.graph.nodes) node.mutates = rng() % 5 == 0;
    auto order = mp::PipelineOrder(b.graph);
    std::vector<int> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    CHECK(sorted == Identity(int(order.size())));
    CHECK(RespectsEdges(b.graph, order));
  }
}

TEST_CASE("a 10,000-node chain orders without deep recursion") {
  std::vector<double> ms(10000, 1.0);
  auto b = mp::testing::Chain(ms, 4);
  auto order = mp::PipelineOrder(b.graph);
  CHECK(order == Identity(10000));
}

TEST_CASE("the last stage holds what the loss keeps of the output, a micro-batch's each in flight") {
  // mpexec's loss keeps the graph's output 0 until the backward (mse its
  // input, cross entropy a log-softmax of its size); a last linear does not
  // keep it itself. GPT's last stage under GPipe measured 12% over its plan
  // without it: a micro-batch's logits each.
  auto b = mp::testing::Chain({1, 1, 1}, 100, 4000);
  const int out = b.graph.outputs.front();
  b.graph.values[out].kept_for_backward = false;
  const auto order = mp::PipelineOrder(b.graph);
  const auto costs = mp::ComputeOrderCosts(b.graph, b.profile, order, 8, true);
  CHECK(costs.loss_kept_bytes == 800);
  CHECK(mp::ComputeOrderCosts(b.graph, b.profile, order, 8, false).loss_kept_bytes == 0);  // inference: no loss
  const mp::StageCostModel model(costs, mp::StageSpecs(mp::UniformCluster(2, {}), mp::ScheduleKind::kGPipe, 2, 2),
                                 2.0);
  b.graph.values[out].kept_for_backward = true;  // kept by its producer: counted there, not twice
  const auto kept = mp::ComputeOrderCosts(b.graph, b.profile, order, 8, true);
  CHECK(kept.loss_kept_bytes == 0);
  const mp::StageCostModel counted(kept, mp::StageSpecs(mp::UniformCluster(2, {}), mp::ScheduleKind::kGPipe, 2, 2),
                                   2.0);
  CHECK(model.ActivationBytes(1, 3) == counted.ActivationBytes(1, 3) - kept.kept_bytes[2] + 800);
  CHECK(model.ActivationBytes(0, 1) == counted.ActivationBytes(0, 1));
}
