// The engine walk probe: two chains, timed in alternation.
#include "planner/profile/engine_walk.h"

#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "planner/profile/timer.h"

namespace mp {
namespace {

constexpr int kShort = 1;
constexpr int kLong = 1025;

// A graph whose gradient into `weight` walks `nodes` multiplications below
// the addition that reads it.
struct Chain {
  explicit Chain(int nodes) {
    const at::Tensor start = at::ones({1}).requires_grad_(true);
    at::Tensor y = start;
    for (int i = 0; i < nodes; ++i) y = y * 1.0001;
    weight = at::ones({1}).requires_grad_(true);
    top = (y + weight).sum();
  }
  double CallMs() const {
    const auto start = std::chrono::steady_clock::now();
    torch::autograd::grad({top}, {weight}, {}, /*retain_graph=*/true);
    return MsSince(start);
  }
  at::Tensor weight, top;
};

}  // namespace

double MeasureEngineWalkUs(int turns) {
  const Chain short_chain(kShort), long_chain(kLong);
  for (int i = 0; i < 3; ++i) {  // warm
    short_chain.CallMs();
    long_chain.CallMs();
  }
  std::vector<double> per_node;
  for (int t = 0; t < std::max(1, turns); ++t) {
    const double s = short_chain.CallMs();
    const double l = long_chain.CallMs();
    per_node.push_back(std::max(0.0, (l - s) * 1000 / (kLong - kShort)));
  }
  return Quantile(per_node, 0.5);
}

}  // namespace mp
