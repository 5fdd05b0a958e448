// Layer names from inlined call stacks. Inline records, for every node it
// copies out of a submodule's method, the chain of module instances it went
// through (self.layer2 -> [3] -> conv1), each by the attribute the calling
// method reached it with. Joining their instance names gives the path a
// user knows from the model's print-out, once a call that reached its
// module through several attributes (CallSitePaths) is named by all of them.
#include "planner/graph/layer_name.h"

#include <vector>

namespace mp {

CallSitePaths::Key CallSitePaths::KeyOf(const torch::jit::SourceRange& range, const std::string& name) {
  return {range.source().get(), range.start(), range.end(), name};
}

void CallSitePaths::Collect(const torch::jit::Block* block, const torch::jit::Value* self, std::set<Key>& ambiguous) {
  for (const torch::jit::Node* node : block->nodes()) {
    for (const torch::jit::Block* inner : node->blocks()) Collect(inner, self, ambiguous);
    if (node->kind() != c10::prim::CallMethod) continue;
    std::vector<std::string> chain;
    const torch::jit::Value* v = node->input(0);
    while (v->node()->kind() == c10::prim::GetAttr) {
      chain.insert(chain.begin(), v->node()->s(c10::attr::name));
      v = v->node()->input(0);
    }
    if (v != self || chain.size() < 2) continue;
    std::string path;
    for (const std::string& part : chain) path += (path.empty() ? "" : ".") + part;
    const Key key = KeyOf(node->sourceRange(), chain.back());
    const auto [it, added] = paths_.emplace(key, path);
    if (!added && it->second != path) ambiguous.insert(key);
  }
}

CallSitePaths::CallSitePaths(const torch::jit::Module& module) {
  std::set<const torch::jit::Function*> seen;
  std::set<Key> ambiguous;
  for (const torch::jit::Module& m : module.modules()) {
    for (const torch::jit::Method& method : m.get_methods()) {
      if (!seen.insert(&method.function()).second) continue;
      const std::shared_ptr<torch::jit::Graph> graph = method.graph();
      Collect(graph->block(), graph->inputs().at(0), ambiguous);
    }
  }
  for (const Key& key : ambiguous) paths_.erase(key);
}

std::string CallSitePaths::Path(const torch::jit::SourceRange& range, const std::string& name) const {
  if (paths_.empty()) return name;
  const auto it = paths_.find(KeyOf(range, name));
  return it == paths_.end() ? name : it->second;
}

std::string LayerName(torch::jit::Node* node, const CallSitePaths& call_sites) {
  std::string path;
  if (auto stack = node->callstack()) {
    for (const auto& entry : (*stack)->vec()) {
      const auto& info = std::get<2>(entry);
      if (!info) continue;
      const std::string name = info->instance_name();
      if (name.empty() || name == "SELF" || name == "self") continue;  // calls on self add no path
      path += (path.empty() ? "" : ".") + call_sites.Path(std::get<1>(entry), name);
    }
  }
  if (path.empty() && node->scope() && !node->scope()->isBlank()) {
    path = node->scope()->namesFromRoot();
  }
  return path;
}

}  // namespace mp
