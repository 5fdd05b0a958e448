// One top-level node of the canonical graph as its own compiled program, so
// the profiler can run (and time) it alone on the values it reads.
#pragma once

#include <torch/script.h>

#include <memory>
#include <vector>

#include "planner/graph/run_graph.h"

namespace mp {

class NodeProgram {
 public:
  // The node's outer inputs (OuterInputs order) become graph inputs, except
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

}  // namespace mp
