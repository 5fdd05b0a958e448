// The pipeline order: the topological order of an OpGraph's nodes that the
// partitioner cuts into contiguous stages. It keeps each branch contiguous
// and puts a join right after its last branch, so fewer values are live
// across a cut than in an arbitrary topological order.
#pragma once

#include <vector>

#include "planner/graph/op_graph.h"

namespace mp {

// MakeDag's data edges plus write-order edges: for a node that mutates its
// inputs in place, an edge from every earlier (canonical) consumer of each of
// its inputs to it, and from it to every later one, so no order moves a
// reader across a write.
OpDag MakeOrderingDag(const OpGraph& graph);

// Node ids in pipeline order (a permutation of 0..n-1, topological for
// MakeOrderingDag). Deterministic.
std::vector<int> PipelineOrder(const OpGraph& graph);

}  // namespace mp
