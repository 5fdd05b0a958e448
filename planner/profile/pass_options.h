// How the profiler runs the graph: one pass over its nodes (node_by_node.h)
// or in one piece (whole_graph.h), with or without autograd and timing, on
// which device, and what runs between the timed passes.
#pragma once

#include <c10/core/Device.h>

#include <functional>

#include "planner/profile/drift_reference.h"
#include "planner/profile/node_overhead.h"
#include "planner/profile/timer.h"

namespace mp {

struct PassOptions {
  bool training = false;       // autograd on; backward pass from the outputs
  bool timed = true;           // false: run every node once, no timing
  bool whole_graph = true;     // timed: also time the graph in one piece (whole_forward/backward)
  TimingOptions timing;
  c10::Device device = c10::Device(c10::kCPU);
  std::function<void()> progress;  // called after each node's forward and backward, every pass
  // Timed: the drift reference to time before every kept pass (not owned;
  // null: none).
  DriftReference* reference = nullptr;
  // Timed: called before every kept pass, untimed (the contention probe's
  // turns, spread over the profile).
  std::function<void()> between_passes;
  // Timed: what timing a node alone adds (node_overhead.h), taken off each
  // node's samples.
  NodeOverhead overhead;
};

// Passes RunNodeByNode makes (forward; training makes as many backward):
// max(1, warmup) + max(1, repeats) when timed, else 1.
int PassCount(const PassOptions& options);

}  // namespace mp
