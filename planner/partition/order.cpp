// The pipeline order: a demand-driven postorder. A depth-first search from
// each sink (ascending id) over the reversed ordering DAG emits a node only
// after all its inputs, visiting the inputs in argument order. So a branch is
// emitted in one piece, a join right after its last branch, and a source
// (a constant, a lookup of a parameter) right before the first node that
// needs it instead of at the front, the order in which Sethi and Ullman
// evaluate expression trees. Boost's depth_first_visit keeps its own stack,
// so a 10,000-node chain does not recurse 10,000 deep.
#include "planner/partition/order.h"

#include <boost/graph/depth_first_search.hpp>

#include <set>
#include <utility>

namespace mp {
namespace {

// Edges u -> v in the order the ordering DAG has them, without duplicates.
std::vector<std::pair<int, int>> OrderingEdges(const OpGraph& graph) {
  std::vector<std::pair<int, int>> edges;
  for (const OpNode& node : graph.nodes) {
    for (int value : node.inputs) {
      const OpValue& v = graph.values.at(value);
      if (v.producer >= 0 && v.producer != node.id) edges.push_back({v.producer, node.id});
      if (!node.mutates) continue;
      for (int reader : v.consumers) {
        if (reader < node.id) edges.push_back({reader, node.id});
        if (reader > node.id) edges.push_back({node.id, reader});
      }
    }
  }
  // Keep first occurrences, in argument order per node.
  std::set<std::pair<int, int>> seen;
  std::vector<std::pair<int, int>> unique;
  for (const auto& e : edges) {
    if (seen.insert(e).second) unique.push_back(e);
  }
  return unique;
}

struct FinishRecorder : boost::default_dfs_visitor {
  std::vector<int>* order;
  template <typename Vertex, typename Graph>
  void finish_vertex(Vertex v, const Graph&) const {
    order->push_back(int(v));
  }
};

}  // namespace

OpDag MakeOrderingDag(const OpGraph& graph) {
  OpDag dag(graph.nodes.size());
  for (const auto& [u, v] : OrderingEdges(graph)) boost::add_edge(u, v, dag);
  return dag;
}

std::vector<int> PipelineOrder(const OpGraph& graph) {
  const int n = int(graph.nodes.size());
  // Reversed DAG with each node's inputs in argument order: edges v -> u.
  OpDag inputs_of(n);
  std::vector<bool> has_successor(n, false);
  for (const auto& [u, v] : OrderingEdges(graph)) {
    boost::add_edge(v, u, inputs_of);
    has_successor[u] = true;
  }
  std::vector<int> order;
  order.reserve(n);
  FinishRecorder recorder;
  recorder.order = &order;
  std::vector<boost::default_color_type> colors(n, boost::white_color);
  auto color_map = boost::make_iterator_property_map(colors.begin(), boost::get(boost::vertex_index, inputs_of));
  for (int v = 0; v < n; ++v) {
    if (!has_successor[v]) boost::depth_first_visit(inputs_of, v, recorder, color_map);
  }
  return order;
}

}  // namespace mp
