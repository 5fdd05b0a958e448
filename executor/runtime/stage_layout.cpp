// BuildStageLayout: parameters and their aliases, the loss stage, and each
// boundary's keys in an order every process derives alike from the graph.
#include "executor/runtime/stage_layout.h"

#include <algorithm>

namespace mp {
namespace {

// Graph inputs, then node outputs in graph order; versions after that.
std::vector<BoundaryValue> InGraphOrder(const torch::jit::Graph& graph, const std::set<BoundaryValue>& keys) {
  std::map<const torch::jit::Value*, size_t> position;
  for (const torch::jit::Value* v : graph.inputs()) position.emplace(v, position.size());
  for (const torch::jit::Node* node : graph.nodes()) {
    for (const torch::jit::Value* v : node->outputs()) position.emplace(v, position.size());
  }
  std::vector<BoundaryValue> out(keys.begin(), keys.end());
  std::sort(out.begin(), out.end(), [&](const BoundaryValue& a, const BoundaryValue& b) {
    return std::make_pair(position.at(a.value), a.version) < std::make_pair(position.at(b.value), b.version);
  });
  return out;
}

}  // namespace

StageLayout BuildStageLayout(const CanonicalGraph& canonical, const std::vector<StageGraph>& stages, bool training) {
  StageLayout layout;
  const int K = int(stages.size());
  const auto graph_inputs = canonical.graph->inputs();
  for (size_t i = 0; i < canonical.num_model_inputs; ++i) layout.model_inputs.push_back({graph_inputs[i], 0});
  for (size_t i = 0; i < canonical.params.size(); ++i) {
    layout.param_index[{graph_inputs[canonical.num_model_inputs + i], 0}] = i;
  }
  layout.stage_params.resize(K);
  layout.first_user.assign(canonical.params.size(), -1);
  for (int s = 0; s < K; ++s) {
    for (const BoundaryValue& key : stages[s].inputs) {
      auto it = layout.param_index.find(key);
      if (it == layout.param_index.end()) continue;
      const size_t i = it->second;
      const at::Tensor& tensor = canonical.params[i].tensor;
      if (layout.first_user[i] < 0) {
        layout.first_user[i] = s;
        layout.stage_params[s][key] = tensor;
      } else if (training && tensor.requires_grad()) {
        at::Tensor alias = tensor.detach().requires_grad_(true);
        layout.aliases.emplace_back(i, alias);
        layout.stage_params[s][key] = alias;
      } else {
        layout.stage_params[s][key] = tensor;
      }
    }
  }

  for (const torch::jit::Value* out : canonical.graph->outputs()) {
    layout.output_keys.push_back({out, canonical.mutation.FinalVersion(out)});
  }
  // A loss is taken where its output is made (it may be relayed further).
  for (const BoundaryValue& key : layout.output_keys) {
    int made = -1;
    for (int s = 0; s < K && made < 0; ++s) {
      if (std::find(stages[s].outputs.begin(), stages[s].outputs.end(), key) != stages[s].outputs.end()) made = s;
    }
    layout.output_stage.push_back(made);
  }
  // Model outputs are not relayed: the stage that makes one hands it to the
  // results directly.
  layout.needed_after.resize(K);
  for (int s = K - 2; s >= 0; --s) {
    layout.needed_after[s] = layout.needed_after[s + 1];
    for (const BoundaryValue& key : stages[s + 1].inputs) {
      if (!layout.param_index.count(key)) layout.needed_after[s].insert(key);
    }
  }
  std::set<BoundaryValue> held(layout.model_inputs.begin(), layout.model_inputs.end());
  for (int s = 0; s + 1 < K; ++s) {
    held.insert(stages[s].outputs.begin(), stages[s].outputs.end());
    std::set<BoundaryValue> sent;
    for (const BoundaryValue& key : held) {
      if (layout.needed_after[s].count(key)) sent.insert(key);
    }
    layout.boundary.push_back(InGraphOrder(*canonical.graph, sent));
    held = std::move(sent);
  }
  return layout;
}

}  // namespace mp
