// The engine walk probe: what one autograd engine call pays per node of the
// graph below where it starts. Before it runs anything, the engine walks
// everything reachable from its roots twice (which nodes lead to the
// gradients asked for, and how many inputs each will wait for). mpexec's W
// (executor/runtime/split_backward.h) starts one call at each
// weight-consuming node of a split stage, and each call walks the whole
// stage below that node again; the profile times every node's W on a graph
// cut at the node, where there is nothing below to walk. On a GPT stage of
// 24 weight-consuming nodes the calls walked 3,442 nodes in all, 0.6-0.7 ms
// of a 5 ms W that the nodes' sum did not show (docs/BENCHMARKS.md, issue
// 30). The planner charges a split stage's W that walk (partition.cpp).
#pragma once

namespace mp {

// Microseconds per node: the median over `turns` paired timings of an
// engine call asked for one leaf's gradient through a chain of cheap nodes
// (a scalar multiplication each), long against short, the difference over
// the difference in nodes. On the calling thread, one intra-op thread.
double MeasureEngineWalkUs(int turns);

}  // namespace mp
