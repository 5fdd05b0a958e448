// Runs the canonical graph one top-level node at a time on real tensors,
// timing each node's forward and, in training, its backward in a reverse
// pass: the profiler's measuring engine.
#pragma once

#include <torch/script.h>

#include <functional>
#include <memory>
#include <vector>

#include "planner/graph/canonical_graph.h"
#include "planner/profile/flops.h"
#include "planner/profile/pass_options.h"
#include "planner/profile/timer.h"

namespace mp {

struct NodeSample {
  double forward_ms = 0;
  double forward_spread = 0;
  double backward_ms = 0;
  // Training: the backward split as zb-h1 runs it (I, then W), timed in
  // passes of their own (node_by_node.cpp); I + W is B within the cost of
  // a second autograd call. A node that reads no parameter-only value is
  // all I; one whose inputs are all parameter-only values is all W.
  double input_backward_ms = 0;
  double weight_backward_ms = 0;
  NodeWork work;
  int64_t output_bytes = 0;
  int64_t param_bytes = 0;
  // Training on CPU: the bytes the node's forward allocated that autograd
  // keeps until the backward (node_by_node.cpp, MeasureKept); -1 where not
  // counted.
  int64_t kept_bytes = -1;
  // Training, in the split passes: the gradients I kept for W
  // (SplitBackward::HeldBytes; 0 where the node does not split); -1 where
  // no split pass ran.
  int64_t weight_kept_bytes = -1;
  // Training on CPU: the most the node allocates while it runs beyond what
  // it leaves (its forward's scratch: a convolution's unfolded input) and
  // beyond what was live before its backward (the gradients it makes and
  // their scratch; where it splits, the larger of I's and of W's with I's
  // gradients), counted in the first pass (node_by_node.cpp); -1 where not
  // counted.
  int64_t forward_working_bytes = -1;
  int64_t backward_working_bytes = -1;
};

struct PassResult {
  std::vector<NodeSample> nodes;         // canonical node id
  std::vector<int64_t> value_bytes;      // OpGraph value id (inputs, params, node outputs)
  std::vector<c10::IValue> outputs;      // the graph's outputs
  // Training: d(sum of the floating-point outputs)/d(parameter), one per
  // canonical.params entry; undefined where the output does not depend on it.
  std::vector<at::Tensor> param_grads;
  // Timed passes only: the whole graph in one piece (forward, and backward
  // from the sum of the outputs), timed once before every node-by-node
  // pass, so both medians come from the same stretch of a noisy machine.
  Timing whole_forward;
  Timing whole_backward;
  // Timed passes only, one per kept pass: the sum of its nodes' forward and
  // backward times, whether its backward was split into I and W, and the
  // drift reference timed just before it.
  std::vector<double> pass_ms;
  std::vector<bool> pass_split;
  std::vector<double> reference_ms;
  // Timed training passes, one per kept pass: the time of adding each
  // parameter's gradient into a gradient kept from the pass before, as
  // autograd adds a micro-batch's into .grad, and the bytes added.
  std::vector<double> accumulate_ms;
  std::vector<int64_t> accumulate_bytes;
};

// `model_inputs` are the model's inputs (not the parameters); they and the
// parameters are moved to options.device. Each node is timed in situ, in
// passes over the whole graph (see node_by_node.cpp). Training on a model
// whose backward autograd refuses (an in-place write to a saved value) is
// an InputError, raised before any per-node work. In training, every node runs on
// detached copies of its inputs, so its backward is its own and nobody
// else's; the reverse pass feeds each node the real gradients of its
// outputs, so the pass as a whole is a real backward.
PassResult RunNodeByNode(const CanonicalGraph& canonical, const std::vector<c10::IValue>& model_inputs,
                         const PassOptions& options);

// The same passes one at a time, so that the profiler can take turns
// between micro-batch sizes: pass 1 of every size, then pass 2 of every
// size, and so on. Run back to back, each size's passes fell in a stretch
// of their own, and the machine's speed in that stretch became the size's:
// four profiles of the zoo GPT put one size 10% apart while every size's
// own passes agreed within 1% (docs/profile.md).
class NodeByNodePasses {
 public:
  // Compiles the nodes and times the whole graph where options ask it.
  NodeByNodePasses(const CanonicalGraph& canonical, const std::vector<c10::IValue>& model_inputs,
                   const PassOptions& options);
  ~NodeByNodePasses();
  bool Done() const;    // every pass has run
  void RunPass();       // the next pass (warm-up passes first)
  PassResult Finish();  // after the last pass: the medians

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mp
