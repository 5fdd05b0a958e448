// UnrollForLoops: a `for` loop of the model's forward with a constant trip
// count becomes that many copies of its body, so the partitioner can cut
// between iterations. ALBERT's cross-layer sharing (one encoder layer
// applied N times) or a Universal Transformer is such a loop; kept whole,
// a prim::Loop is one atomic node, and its N layers could only ever be one
// stage.
#pragma once

#include <torch/script.h>

namespace mp {

// Unrolls every prim::Loop of the graph's top-level block whose trip count
// is a constant, whose condition is constantly true (a `for` over a
// range), whose body writes in place nothing made before the loop (a list
// it appends to), and whose copies add at most `max_nodes` nodes in all
// (counted with their blocks); loops inside the unrolled bodies are unrolled in turn.
// Iteration k's copy reads the constant k for the loop counter and the
// previous copy's carried values. Returns the number of loops unrolled.
int UnrollForLoops(torch::jit::Graph& graph, int64_t max_nodes = 4096);

}  // namespace mp
