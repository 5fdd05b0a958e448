// One top-level node of the canonical graph as its own compiled program, so
// the profiler can run (and time) it alone on the values it reads, and an
// error can name the node that rejected the model's inputs.
#pragma once

#include <torch/script.h>

#include <memory>
#include <string>
#include <vector>

#include "planner/graph/run_graph.h"

namespace mp {

struct CanonicalGraph;

class NodeProgram {
 public:
  // The node's outer inputs (OuterInputs order; a node without blocks, one
  // inside a block too, its own inputs) become graph inputs, except
  // constants, which are cloned in; blocks (prim::If, prim::Loop) come along.
  explicit NodeProgram(const torch::jit::Node* node);

  // The canonical values this program reads, in Run()'s argument order.
  const std::vector<const torch::jit::Value*>& Inputs() const { return inputs_; }
  // Returns the node's outputs in order.
  std::vector<c10::IValue> Run(std::vector<c10::IValue> inputs) const { return runner_.Run(std::move(inputs)); }

 private:
  static std::shared_ptr<torch::jit::Graph> Build(const torch::jit::Node* node,
                                                  std::vector<const torch::jit::Value*>& inputs);
  std::vector<const torch::jit::Value*> inputs_;
  GraphRunner runner_;
};

// Runs the canonical graph one top-level node at a time on `model_inputs`
// and describes the first node that throws: "node 4 (aten::linear in layer
// fc1): <the first line of its error>". Empty when every node runs.
std::string DescribeFailingNode(const CanonicalGraph& canonical, const std::vector<c10::IValue>& model_inputs);

}  // namespace mp
