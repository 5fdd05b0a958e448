// DominanceSum: sums of weighted points below an x and at or above a y,
// against brute force, and the relays it lets a stage hold once.
#include <doctest/doctest.h>

#include <map>
#include <random>

#include "planner/graph/saved_values.h"
#include "planner/partition/cut_cost.h"
#include "planner/partition/dominance_sum.h"
#include "planner/partition/order.h"
#include "planner/partition/stage_cost.h"
#include "tests/partition/synthetic.h"

TEST_CASE("dominance sums equal brute force on random points, repeated coordinates included") {
  std::mt19937 rng(11);
  for (int size : {1, 2, 7, 64}) {
    CAPTURE(size);
    std::uniform_int_distribution<int> coordinate(0, size - 1);
    std::vector<mp::DominanceSum::Point> points;
    for (int i = 0; i < 3 * size; ++i) points.push_back({coordinate(rng), coordinate(rng), int64_t(1 + i % 5)});
    const mp::DominanceSum sums(size, points);
    for (int x = 0; x <= size; ++x) {
      for (int y = 0; y <= size; ++y) {
        int64_t want = 0;
        for (const auto& p : points) want += p.x < x && p.y >= y ? p.weight : 0;
        CAPTURE(x);
        CAPTURE(y);
        CHECK(sums.Sum(x, y) == want);
      }
    }
  }
  CHECK(mp::DominanceSum().Sum(3, 0) == 0);  // empty
}

// x -> n1 -> n2 -> n3 -> add(n3, n1): n1's output skips n2 and n3, and no
// reader keeps it (relu keeps its own output, add nothing). A stage of n3
// alone receives it and sends it on unchanged: one tensor, held once, not
// as received and again as sent (Branchy's U-Net skips, up to 50% high).
TEST_CASE("a value a stage receives and sends on unchanged is held once, and its gradient through the backward") {
  mp::testing::GraphBuilder b;
  const auto kind = [&](int value, const char* k) { b.graph.nodes[b.graph.values[value].producer].kind = k; };
  const int x = b.Input(100);
  const int h1 = b.Node("n1", {x}, 1, 1, 100);
  kind(h1, "aten::relu");
  const int h2 = b.Node("n2", {h1}, 1, 1, 200);
  kind(h2, "aten::relu");
  const int h3 = b.Node("n3", {h2}, 1, 1, 300);
  kind(h3, "aten::relu");
  const int out = b.Node("add", {h3, h1}, 1, 1, 300);
  kind(out, "aten::add");
  b.Output(out);
  mp::MarkSavedValues(b.graph);
  REQUIRE(b.graph.values[h1].kept_for_backward);  // relu keeps its output...
  b.graph.values[h1].kept_for_backward = false;   // ...make it a value nobody keeps, as a skip often is
  const std::vector<int> order{0, 1, 2, 3};
  const auto costs = mp::ComputeOrderCosts(b.graph, b.profile, order, 8, true);
  const mp::StageCostModel model(costs, mp::StageSpecs(mp::UniformCluster(4, {}), mp::ScheduleKind::kGPipe, 4, 2),
                                 2.0);
  // n3's stage: its own output (kept by relu), h2 and h1 received, h1 sent.
  CHECK(model.ActivationBytes(2, 3) == 8 * (300 + 200 + 100));
  // n2's stage receives h1 and sends it on too, with h2 (kept).
  CHECK(model.ActivationBytes(1, 2) == 8 * (200 + 100));
  // The stage that makes h1 sends it: held as a root, once.
  CHECK(model.ActivationBytes(0, 1) == 8 * 100);
  // In their backward, the stages that relay h1 hold its gradient twice
  // from its arrival until they send it on (as it came, and as the received
  // h1's .grad); every stage holds the gradients that came back and its
  // node's working memory (not measured here: its input's gradient,
  // estimated at its output's size). The last stage reads h1 and the first
  // makes it; the last holds the gradient the loss makes of its output.
  CHECK(model.TransientBytes(1, 2, false) == 8 * (200 + 100) + 8 * 100 + 8 * 200);
  CHECK(model.TransientBytes(2, 3, false) == 8 * (300 + 100) + 8 * 100 + 8 * 300);
  CHECK(model.TransientBytes(3, 4, false) == 8 * 300 + 8 * 300);
  CHECK(model.TransientBytes(0, 1, false) == 8 * 100 + 8 * 100);
}
