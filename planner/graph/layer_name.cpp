// Layer names from inlined call stacks. Inline records, for every node it
// copies out of a submodule's method, the chain of module instances it went
// through (self.layer2 -> [3] -> conv1). Joining their instance names gives
// the path a user knows from the model's print-out.
#include "planner/graph/layer_name.h"

namespace mp {

std::string LayerName(torch::jit::Node* node) {
  std::string path;
  if (auto stack = node->callstack()) {
    for (const auto& entry : (*stack)->vec()) {
      const auto& info = std::get<2>(entry);
      if (!info) continue;
      const std::string name = info->instance_name();
      if (name.empty() || name == "SELF" || name == "self") continue;  // calls on self add no path
      path += (path.empty() ? "" : ".") + name;
    }
  }
  if (path.empty() && node->scope() && !node->scope()->isBlank()) {
    path = node->scope()->namesFromRoot();
  }
  return path;
}

}  // namespace mp
