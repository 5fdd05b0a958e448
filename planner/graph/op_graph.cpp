// Boost.Graph views of an OpGraph: the dependency DAG, a topological order
// and reachability, for the partitioner.
#include "planner/graph/op_graph.h"

#include <boost/graph/topological_sort.hpp>

#include <algorithm>
#include <iterator>

namespace mp {

OpDag MakeDag(const OpGraph& graph) {
  OpDag dag(graph.nodes.size());
  for (const auto& value : graph.values) {
    if (value.producer < 0) continue;
    for (int consumer : value.consumers) {
      if (consumer != value.producer) boost::add_edge(value.producer, consumer, dag);
    }
  }
  return dag;
}

std::vector<int> TopologicalOrder(const OpGraph& graph) {
  OpDag dag = MakeDag(graph);
  std::vector<OpDag::vertex_descriptor> reversed;
  boost::topological_sort(dag, std::back_inserter(reversed));
  return std::vector<int>(reversed.rbegin(), reversed.rend());
}

std::vector<std::vector<bool>> Reachability(const OpGraph& graph) {
  const size_t n = graph.nodes.size();
  OpDag dag = MakeDag(graph);
  std::vector<std::vector<bool>> reach(n, std::vector<bool>(n, false));
  // Sweep in reverse topological order: what v reaches is its successors
  // plus what they reach.
  auto order = TopologicalOrder(graph);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const int v = *it;
    for (auto [e, end] = boost::out_edges(v, dag); e != end; ++e) {
      const auto w = boost::target(*e, dag);
      reach[v][w] = true;
      for (size_t k = 0; k < n; ++k) {
        if (reach[w][k]) reach[v][k] = true;
      }
    }
  }
  return reach;
}

bool ReadsOnlyFrozen(const OpGraph& graph, const OpNode& node) {
  bool reads = false;
  for (int v : node.inputs) {
    if (!graph.values[v].is_param) continue;
    if (!graph.values[v].frozen) return false;
    reads = true;
  }
  return reads;
}

}  // namespace mp
