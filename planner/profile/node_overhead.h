// What timing a node alone adds to its time. The profiler runs every node
// as a program of its own, its inputs that need a gradient handed over as
// fresh leaves, and calls autograd once per node (per part when split);
// mpexec runs a stage as one program and one autograd call. Each node's
// sample so carries an interpreter start, the clock, a gradient
// accumulator per leaf and an engine call that the stage pays once. On
// GPT (775 nodes, 2 samples, 1 thread) that was 0.6-0.8 ms of a 9.8 ms
// forward: mpexec's stages ran their F at 0.86-0.94x its prediction.
//
// Measured, not assumed: a cheap operator (relu on a small tensor) run as
// the profiler runs a node, against its share of a chain of the same
// operator run in one program (and one autograd call). The profiler takes
// the difference off each sample.
#pragma once

#include <c10/core/Device.h>

#include <functional>

namespace mp {

struct NodeOverhead {
  double forward_call_ms = 0;   // a one-node program's run, less the operator's share of a chain
  double forward_leaf_ms = 0;   // training: more per input handed over as a fresh leaf
  double backward_call_ms = 0;  // an autograd call from one node's outputs, less its share of a chain's call

  // What the profiler's timing of a node's forward adds, with `leaves`
  // inputs handed over as fresh leaves.
  double Forward(int leaves) const { return forward_call_ms + forward_leaf_ms * leaves; }
};

// Medians over interleaved samples on `device`, timed between calls of
// `sync` as the profiler times its nodes; `training` measures the leaf and
// backward parts too. Tens of milliseconds.
NodeOverhead MeasureNodeOverhead(c10::Device device, const std::function<void()>& sync, bool training);

}  // namespace mp
