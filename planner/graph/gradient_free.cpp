#include "planner/graph/gradient_free.h"

namespace mp {

void MarkGradientFree(OpGraph& graph, const std::vector<InPlaceWrite>& writes) {
  std::vector<bool> takes(graph.values.size(), false);
  for (int p : graph.params) takes[p] = !graph.values[p].frozen;
  const auto any_input_takes = [&](const OpNode& node) {
    for (int in : node.inputs) {
      if (takes[in]) return true;
    }
    return false;
  };
  // Writes reach values read before them (a buffer made early, written
  // late), so repeat until nothing changes: each round only adds.
  for (bool changed = true; changed;) {
    changed = false;
    for (const OpNode& node : graph.nodes) {
      if (node.kind == "aten::detach" || !any_input_takes(node)) continue;
      for (int out : node.outputs) {
        if (!takes[out]) takes[out] = true, changed = true;
      }
    }
    for (const InPlaceWrite& w : writes) {
      if (w.statistics || takes[w.value] || !any_input_takes(graph.nodes[w.writer])) continue;
      takes[w.value] = true;
      changed = true;
    }
  }
  for (OpValue& v : graph.values) v.gradient_free = !takes[v.id];
}

}  // namespace mp
