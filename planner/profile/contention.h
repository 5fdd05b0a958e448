// The contention probe: how much slower the model runs when k copies of it
// run at once on this machine, as k CPU-worker stages do. The per-node
// profile is taken with one node running on an idle machine; CPU workers
// share the memory bus, the last-level cache and the allocator's lock, and
// with more workers than cores, the cores themselves. The probe measures
// that once per model instead of guessing it, and the simulator slows an
// action by slowdown[k - 1] while k stages compute at once.
#pragma once

#include <torch/script.h>

#include <vector>

#include "planner/graph/canonical_graph.h"
#include "planner/profile/node_by_node.h"

namespace mp {

// Runs the whole graph (forward, and backward in training) on
// `model_inputs`, for each k = 2, ..., `workers`: `repeats` times alone and
// as k copies in as many threads at once, in turns (more turns, up to 10,
// until the samples span 0.3 s), each thread with
// `threads` intra-op threads. Returns slowdown[k - 1] = median time with k
// running / median time alone, at least 1; slowdown[0] = 1. Every copy
// keeps running until each has its sample, so every sample saw k at work.
std::vector<double> MeasureSharedSlowdown(const CanonicalGraph& canonical, const std::vector<c10::IValue>& model_inputs,
                                          const PassOptions& options, int workers, int threads, int repeats);

}  // namespace mp
