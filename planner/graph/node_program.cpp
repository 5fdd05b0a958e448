// Builds a one-node graph: fresh inputs for the values the node reads from
// other nodes, its constants cloned in (some operators read constant
// arguments when they are compiled), then the node itself with its blocks.
#include "planner/graph/node_program.h"

#include <unordered_map>

#include "common/error.h"
#include "planner/graph/canonical_graph.h"

namespace mp {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

std::shared_ptr<Graph> NodeProgram::Build(const Node* node, std::vector<const Value*>& inputs) {
  auto graph = std::make_shared<Graph>();
  std::unordered_map<const Value*, Value*> map;
  // A node without blocks reads its own inputs: inside a block (BlockWork)
  // they may be values of that block, which OuterInputs leaves out.
  std::vector<const Value*> reads(node->inputs().begin(), node->inputs().end());
  if (!node->blocks().empty()) reads = OuterInputs(node);
  for (const Value* in : reads) {
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

std::string DescribeFailingNode(const CanonicalGraph& canonical, const std::vector<c10::IValue>& model_inputs) {
  std::unordered_map<const Value*, c10::IValue> env;
  const std::vector<c10::IValue> stack = canonical.Stack(model_inputs);
  for (size_t i = 0; i < stack.size(); ++i) env[canonical.graph->inputs()[i]] = stack[i];
  for (size_t id = 0; id < canonical.nodes.size(); ++id) {
    const Node* node = canonical.nodes[id];
    if (node->kind() == c10::prim::Constant) continue;
    std::vector<c10::IValue> outputs;
    try {
      const NodeProgram program(node);
      std::vector<c10::IValue> args;
      for (const Value* in : program.Inputs()) args.push_back(env.at(in));
      outputs = program.Run(std::move(args));
    } catch (const std::exception& e) {
      const std::string& layer = canonical.layers[id];
      return Concat("node ", id, " (", node->kind().toQualString(), layer.empty() ? "" : " in layer " + layer,
                    "): ", ErrorLine(e.what()));
    }
    for (size_t k = 0; k < outputs.size(); ++k) env[node->outputs()[k]] = outputs[k];
  }
  return "";
}

}  // namespace mp
