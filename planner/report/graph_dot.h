// The op graph of a plan as Graphviz DOT, grouped by layer and coloured by
// stage: `dot -Tsvg model.dot` shows where the cuts fall.
#pragma once

#include <string>

#include "planner/graph/op_graph.h"
#include "planner/plan/plan.h"

namespace mp {

// `graph` is the OpGraph the plan was made from. One vertex per (layer,
// stage) group (OpNode::layer; the root module's "" is shown as "(model)"),
// labelled with the layer name and its node count and filled with
// StageColor(stage) (white, dashed, for nodes in no stage). One edge per
// pair of groups some value flows between (constants, which are cloned and
// never sent, draw no edges); an edge crossing a stage boundary is drawn
// bold and labelled with the bytes of its values per micro-batch. A legend
// cluster names each stage with its device and layers. Written with
// boost::write_graphviz; starts with "digraph".
// Throws InputError when the plan's node count is not the graph's.
std::string GraphDot(const OpGraph& graph, const Plan& plan);

// The fill colour of a stage: a palette of 8 pastel colours, cycling
// ("#aec7e8" for stage 0).
std::string StageColor(int stage);

}  // namespace mp
