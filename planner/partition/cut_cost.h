// What a pipeline order costs at one micro-batch size, position by position:
// compute times, parameter and activation bytes, and the bytes that cross
// each cut by liveness. A cut between positions i-1 and i carries every value
// produced before it and read after it (skip connections included), so a
// stage receives what crosses the cut before it and sends what crosses the
// cut after it, relaying values bound for later stages.
//
// What crosses: tensors and other values produced by nodes. Parameters live
// on the stages that read them and constants (rematerializable values) are
// cloned, so neither crosses. A model input is fed to the first stage that
// reads it and crosses every cut up to its last reader after that.
// Gradients flow back through the same cuts for every crossing value except
// model inputs and integer or boolean tensors. A graph output is returned by
// the stage that makes it: it crosses a cut only if a later node reads it.
#pragma once

#include <cstdint>
#include <vector>

#include "planner/graph/op_graph.h"
#include "planner/profile/profile.h"

namespace mp {

// A value that crosses cuts: live across every cut i with born < i <= last_use.
struct LiveValue {
  int value = 0;
  int born = 0;      // position of the producer (of the first reader for model inputs)
  int last_use = 0;  // position of the last reader
  int64_t bytes = 0;
  bool carries_gradient = false;
  bool kept = false;  // kept for the backward by some reader (saved_values.h)
  // Where its storage was made: born, or further up through the nodes that
  // pass a tensor on (a view, a prim::If returning one of its inputs), and
  // whether autograd keeps that storage.
  int storage_born = 0;
  bool storage_kept = false;
};

struct OrderCosts {
  int64_t microbatch = 0;
  bool training = false;
  std::vector<int> order;                  // position -> node id
  std::vector<int> position;               // node id -> position
  std::vector<double> forward_ms;          // per position, one micro-batch
  std::vector<double> backward_ms;         // per position; 0 in inference
  std::vector<double> input_backward_ms;   // per position: zb-h1's I and W (InputBackwardMs)
  std::vector<double> weight_backward_ms;
  std::vector<int64_t> param_bytes;        // per position: parameters it reads first
  std::vector<int64_t> gradient_bytes;     // per position: of those, the ones with a gradient (not frozen)
  std::vector<int64_t> output_bytes;       // per position: what it produces (activations)
  // Per position, training: of what it produces, the storage autograd keeps
  // until the backward (OpValue::kept_for_backward, not an alias).
  std::vector<int64_t> kept_bytes;
  // Per position, training: its output bytes if it reads a parameter (the
  // gradient a split backward's I keeps there for W).
  std::vector<int64_t> weight_output_bytes;
  // Per position, training: the first position at or after it that reads a
  // parameter and uses what it makes, directly or not (n: none). A split
  // backward's W keeps the graph from such nodes down, so what a node keeps
  // stays from I to W only where that position is in its stage.
  std::vector<int> next_weight_reader;
  // Per position: the most its forward allocates beyond what it leaves
  // (NodeCost::forward_working_bytes: a convolution's reordered weights or
  // unfolded input; 0 where not measured), and in training its backward
  // beyond what was live before it (NodeCost::backward_working_bytes; not
  // measured: its input's gradient, about its outputs' bytes, and its
  // parameters' gradients).
  std::vector<int64_t> forward_working_bytes;
  std::vector<int64_t> backward_working_bytes;
  // Per position, training: of that, what a split backward's I needs: all
  // but its weights' gradients, which W makes later (the weights it reads,
  // in a list too: nn.LSTM's).
  std::vector<int64_t> input_backward_working_bytes;
  std::vector<int64_t> cut_bytes;          // per cut 0..n: activations crossing forward
  std::vector<int64_t> cut_grad_bytes;     // per cut 0..n: gradients crossing backward
  // Per cut 0..n: of cut_bytes, what autograd would not keep; a stage keeps
  // what it sends until its backward all the same (the gradients' roots).
  std::vector<int64_t> cut_unkept_bytes;
  std::vector<LiveValue> live_values;      // values that cross at least one cut
  // Training: what mpexec's loss keeps of the graph's output 0 until the
  // last stage's backward (mse its input, cross entropy its log-softmax of
  // the same size), where the output's producer does not keep it already.
  int64_t loss_kept_bytes = 0;
  // Training: the gradient mpexec's loss makes of output 0 (its bytes),
  // held until its producer's backward has used it.
  int64_t loss_gradient_bytes = 0;

  int Positions() const { return int(order.size()); }
  bool Useful(int p) const { return forward_ms[p] + backward_ms[p] > 0; }
};

// Throws InputError when the profile does not describe the graph (node or
// value count, fingerprint) and PlanError when the micro-batch size is
// outside the profiled sizes.
OrderCosts ComputeOrderCosts(const OpGraph& graph, const Profile& profile, const std::vector<int>& order,
                             int64_t microbatch, bool training);

// The values crossing cut i (0 < i < n), ascending by value id.
std::vector<LiveValue> ValuesAcrossCut(const OrderCosts& costs, int cut);

}  // namespace mp
