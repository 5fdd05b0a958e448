// BlockWork: the work estimate (flops.h) of a prim::If or prim::Loop node,
// as the sum over the nodes its blocks run. nn.TransformerEncoderLayer's
// scripted forward is one such If (its fast path or its slow path, chosen
// at run time), so a whole attention layer was estimated as one
// elementwise op on its output: an analytic profile (--device-profile)
// costed 3 layers of the zoo's BERT below a dropout.
#pragma once

#include <torch/script.h>

#include <functional>
#include <optional>

#include "planner/profile/flops.h"

namespace mp {

// Walks `node`'s blocks as the interpreter would on these values (the
// branch the condition takes, each iteration of a loop), runs every inner
// node alone to learn its shapes, and sums EstimateWork over them. `outer`
// gives the value of anything the blocks read from outside the node.
// Nothing, rather than a guess, where a node will not run alone or the
// walk passes `max_runs` inner nodes: the caller keeps its own estimate.
std::optional<NodeWork> BlockWork(const torch::jit::Node* node,
                                  const std::function<c10::IValue(const torch::jit::Value*)>& outer,
                                  int max_runs = 20000);

// Every tensor inside a value, as EstimateWork reads one argument.
ArgTensors DimsOf(const c10::IValue& value);

}  // namespace mp
