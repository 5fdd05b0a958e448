// The backward split in two for zero-bubble schedules (`I` and `W`), after
// Qi et al. (ICLR 2024) and torch.distributed.pipelining's
// stage_backward_input / stage_backward_weight:
//
// - I computes the gradients of the stage's received tensors only, keeping
//   the autograd graph. Before it runs, the graph is walked once: L is the
//   set of nodes on a path to a received tensor (what I executes); a node of
//   L whose edges lead out of L towards parameters is an "intermediate",
//   and a hook on it keeps the gradient that reaches it during I. The
//   roots and their seeds go after I: what the graph keeps for W is then
//   what hangs from the intermediates (the rest of the stage's graph, and
//   what its nodes saved, is freed at I).
// - W runs one engine call from a stand-in for each intermediate: a node
//   that runs the intermediate's backward on the kept gradient and has
//   edges only to the intermediate's children outside L that lead to a
//   parameter; and from the roots outside L, with their seeds (I never ran
//   them). Nothing outside L leads back into L, so the call computes the
//   weight gradients (and the cheap nodes between, such as a weight's
//   transpose) without the input-gradient chain again: starting the engine
//   at the intermediates themselves walked the whole stage below each one
//   first, 3,442 nodes per W on a GPT stage of 24 (0.6-0.7 ms of 5), and
//   one call from them all would run L between them again. A parameter
//   several intermediates reach (a weight used at every step of an RNN,
//   or tied) gets their sum in that call, as in B: sent to a second
//   backward from the roots instead, the zoo LSTM's I + W ran 1.9-2.0x
//   its B.
// - A normalisation in training (batch, layer and group norm) makes its
//   input gradient from the per-channel sums its weights' gradients are:
//   I computes its weights' gradients with it, where W would make the sums
//   again (MobileNetV2's batch norms at 8 samples: I + W 1.75x their B).
// - A stage whose inputs take no gradient (the first) has nothing for I:
//   its W is one plain backward, as B runs it. Asked for its parameters
//   with the graph kept, the first GPT stage's W ran 1.15x its B.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/autograd/edge.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace mp {

class SplitBackward {
 public:
  // I: the backward from `roots` (seeded with `seeds`) into `leaves`; each
  // leaf's gradient lands in its .grad, as do those of the parameters only
  // normalisations use (their gradients come with the input's). `params`:
  // the stage's parameters, whose gradients W computes.
  SplitBackward(std::vector<at::Tensor> roots, std::vector<at::Tensor> seeds, const std::vector<at::Tensor>& leaves,
                const std::vector<at::Tensor>& params);
  // W: accumulates the parameters' gradients into their .grad and frees
  // what I kept. Once.
  void Weights();
  // What W's engine call will walk, before Weights: the autograd nodes
  // reachable from where it starts (the engine walks them to find what
  // leads to the parameters asked for). For tests.
  int64_t WalkedNodes() const;
  // The bytes of the gradients I kept for W, until Weights frees them (a
  // storage's views, up to its own size): what a micro-batch holds from its
  // I to its W beyond its activations.
  int64_t HeldBytes() const;

 private:
  struct Group;
  std::vector<std::shared_ptr<torch::autograd::Node>> Starts() const;
  std::vector<at::Tensor> roots_, seeds_;
  std::vector<std::shared_ptr<Group>> groups_;  // one per intermediate
  std::vector<std::pair<torch::autograd::Edge, at::Tensor>> outside_roots_;  // roots outside L, seeds
  std::vector<torch::autograd::Edge> to_;       // the parameters' accumulators W reaches
  bool whole_ = false;                          // no leaves: W is one plain backward
};

}  // namespace mp
