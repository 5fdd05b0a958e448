// What autograd keeps of a forward until the backward: per value, whether
// some node saves it for its gradient (a linear its input, a relu its
// output), and whether the value is storage of its own or an alias of
// another's (views, in-place results). A stage in training holds, per
// micro-batch in flight, the saved values it made; the rest are freed as
// soon as their last reader has run. Counting every output instead
// predicted the zoo's activations up to 2x too high (docs/BENCHMARKS.md,
// issue 27).
//
// The rules go by the reading node's kind, as PyTorch's derivatives.yaml
// saves: shape and arithmetic ops that need no input for their gradient
// (add, cat, sum, views) save nothing; ops whose gradient is a function of
// their result (relu, tanh, sigmoid, softmax, exp, dropout's scaled mask)
// save their output; every other op saves its tensor inputs (linear,
// matmul, convolutions, normalisations, mul, unknown kinds: the safe side).
// Lists and tuples pass the question on to their readers. A node no
// gradient reaches (OpValue::gradient_free) keeps nothing.
#pragma once

#include <string>
#include <vector>

#include "planner/graph/op_graph.h"

namespace mp {

struct SavedValues {
  std::vector<bool> saved;  // per value id: kept until the backward
  std::vector<bool> alias;  // per value id: shares an input's storage (a view, an in-place result)
  // Per node id: what it keeps beyond graph values, as a multiple of its
  // outputs' bytes (max pooling's int64 indices: 2 for float outputs).
  std::vector<double> extra;
};

SavedValues FindSavedValues(const OpGraph& graph);

// Sets OpValue::kept_for_backward and alias and OpNode::kept_extra from
// FindSavedValues (BuildOpGraph does).
void MarkSavedValues(OpGraph& graph);

}  // namespace mp
