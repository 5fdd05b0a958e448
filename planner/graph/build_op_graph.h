// CanonicalGraph -> OpGraph, and the shape probe that fills in bytes.
#pragma once

#include <torch/script.h>

#include <vector>

#include "planner/graph/canonical_graph.h"
#include "planner/graph/op_graph.h"

namespace mp {

// The plain view of `canonical`, without shapes (bytes 0).
OpGraph BuildOpGraph(const CanonicalGraph& canonical);

// Runs the canonical graph once on `model_inputs` and records dtype, shape
// and bytes of every tensor value in `graph`. Only the sizes are kept, not
// the activations, so memory stays that of a plain forward. A shape or
// dtype the model rejects is an InputError naming the failing node.
void FillShapes(const CanonicalGraph& canonical, const std::vector<c10::IValue>& model_inputs,
                OpGraph& graph);

}  // namespace mp
