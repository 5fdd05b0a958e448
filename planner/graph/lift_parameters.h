// LiftParameters: the graph pass that turns module state into graph inputs.
#pragma once

#include <torch/script.h>

#include <string>
#include <vector>

namespace mp {

struct LiftedTensor {
  std::string name;      // qualified path: layer3.2.conv1.weight, lstm.weight_hh_l1
  torch::Tensor tensor;
  bool is_parameter;     // false for buffers (running_mean) and plain tensor attributes
};

// Rewrites every `prim::GetAttr` chain rooted at `self` (graph input 0) in an
// inlined graph of `module`'s method:
//   - a tensor attribute becomes a new graph input named by its path; a
//     tensor shared by several paths (tied weights) becomes one input;
//   - a list of tensors (nn.LSTM's _flat_weights) becomes one input per
//     element joined by a prim::ListConstruct;
//   - any other attribute (training, ints, None, int lists) becomes a constant.
// Removes `self`. New inputs are appended after the model inputs, in order of
// first use; the returned tensors match them one to one.
// Throws InputError if the graph still needs a module object afterwards
// (prim::SetAttr, a module passed as a value).
std::vector<LiftedTensor> LiftParameters(torch::jit::Graph& graph,
                                         const torch::jit::Module& module);

}  // namespace mp
