// The synthetic graphs the planner-speed benchmarks plan: a long chain and
// a branchy DAG (residual blocks with an occasional long skip), with seeded
// random times and bytes. Plain structs, no LibTorch.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "tests/partition/synthetic.h"

namespace mp::bench {

inline const std::vector<int64_t> kSyntheticSizes = {1, 2, 4, 8, 16, 32, 64};

// A chain of n nodes in blocks of 100 layers.
inline mp::testing::GraphBuilder LongChain(int n) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> ms(0.5, 1.5);
  mp::testing::GraphBuilder b(kSyntheticSizes);
  int v = b.Input(4096);
  for (int i = 0; i < n; ++i) v = b.Node("block" + std::to_string(i / 100), {v}, ms(rng), 2 * ms(rng), 4096, 65536);
  b.Output(v);
  return b;
}

// Residual blocks (two branches and a join) with a DenseNet-like
// concatenation every tenth block, until the graph has n nodes.
inline mp::testing::GraphBuilder BranchyDag(int n) {
  std::mt19937 rng(2);
  std::uniform_real_distribution<double> ms(0.1, 2.0);
  mp::testing::GraphBuilder b(kSyntheticSizes);
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

}  // namespace mp::bench
