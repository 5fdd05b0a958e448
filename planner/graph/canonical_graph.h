// The canonical graph: a model's forward as one flat, cuttable TorchScript
// graph whose inputs are the model inputs followed by every parameter and
// buffer, with canonical node ids 0..N-1 in topological order.
#pragma once

#include <torch/script.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "planner/graph/layer_name.h"
#include "planner/graph/lift_parameters.h"
#include "planner/graph/model_arguments.h"
#include "planner/graph/mutation.h"

namespace mp {

struct CanonicalOptions {
  bool training = false;  // module.train(training) before attributes become constants
  // Which of forward's arguments the input spec gives; the rest take their
  // defaults (BindArguments). By default, those without a default.
  GivenArguments given = {};
};

struct CanonicalGraph {
  std::shared_ptr<torch::jit::Graph> graph;
  size_t num_model_inputs = 0;           // graph->inputs()[0, num_model_inputs)
  std::vector<std::string> input_names;  // model argument names (hidden[0] for a tuple's element)
  std::vector<LiftedTensor> params;      // graph->inputs()[num_model_inputs + i]
  std::vector<torch::jit::Node*> nodes;  // canonical id -> top-level node
  std::vector<std::string> layers;       // canonical id -> module path ("" = root)
  std::string fingerprint;               // of the printed IR, see Fingerprint()
  MutationInfo mutation;                 // in-place writes, rebuildable values
  int random_ops = 0;                    // SeedRandomOps' count: ops that draw random numbers

  int NodeId(const torch::jit::Node* node) const { return node_ids_.at(node); }
  // The canonical id of the top-level node that holds `node` (itself, or
  // the prim::If / prim::Loop whose block contains it).
  int OwnerId(const torch::jit::Node* node) const;
  // The graph inputs followed by the parameter tensors, ready for Run().
  std::vector<c10::IValue> Stack(const std::vector<c10::IValue>& model_inputs) const;

  std::unordered_map<const torch::jit::Node*, int> node_ids_;
};

// Inline -> LiftParameters -> ConstantPropagation to its fixed point -> ConstantPooling ->
// EliminateDeadCode -> SeedRandomOps, then numbering, layer names and the fingerprint.
// Changes `module`'s training flag to options.training.
CanonicalGraph Canonicalize(torch::jit::Module& module, const CanonicalOptions& options = {});

// The values a top-level node reads from outside itself: its inputs plus
// the outer values its blocks read (graph inputs or top-level outputs).
std::vector<const torch::jit::Value*> OuterInputs(const torch::jit::Node* node);

// Numbers the nodes, names their layers (with the model's call sites where
// known), analyses mutation; Canonicalize calls it, tests that start from
// parseIR text call it directly.
void IndexNodes(CanonicalGraph& canonical, const CallSitePaths& call_sites = CallSitePaths());

}  // namespace mp
