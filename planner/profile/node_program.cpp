// Builds a one-node graph: fresh inputs for the values the node reads from
// other nodes, its constants cloned in (some operators read constant
// arguments when they are compiled), then the node itself with its blocks.
#include "planner/profile/node_program.h"

#include <unordered_map>

#include "planner/graph/canonical_graph.h"

namespace mp {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

std::shared_ptr<Graph> NodeProgram::Build(const Node* node, std::vector<const Value*>& inputs) {
  auto graph = std::make_shared<Graph>();
  std::unordered_map<const Value*, Value*> map;
  for (const Value* in : OuterInputs(node)) {
    if (in->node()->kind() == c10::prim::Constant) {
      Node* constant = graph->createClone(const_cast<Node*>(in->node()), [](Value*) -> Value* { return nullptr; });
      graph->insertNode(constant);
      map[in] = constant->output();
    } else {
      map[in] = graph->addInput()->setType(in->type());
      inputs.push_back(in);
    }
  }
  Node* clone = graph->createClone(const_cast<Node*>(node), [&](Value* v) { return map.at(v); });
  graph->insertNode(clone);
  for (Value* out : clone->outputs()) graph->registerOutput(out);
  return graph;
}

NodeProgram::NodeProgram(const Node* node) : runner_(Build(node, inputs_), node->kind().toQualString()) {}

}  // namespace mp
