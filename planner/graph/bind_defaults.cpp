// BindDefaults (bind_defaults.h). Python callers leave trailing arguments
// out to take their defaults; an input spec (or --input, one per argument)
// does the same by being shorter than forward's argument list. A default
// bound as a constant is folded by canonicalisation's ConstantPropagation
// (`if mask is None:` keeps one branch), so the graph is the one a call
// without the argument runs.
#include "planner/graph/bind_defaults.h"

#include <algorithm>

#include "common/error.h"

namespace mp {

namespace {

bool IsOptionalTensor(const c10::TypePtr& type) {
  const auto optional = type->cast<c10::OptionalType>();
  return optional && optional->getElementType()->kind() == c10::TypeKind::TensorType;
}

}  // namespace

void BindDefaults(torch::jit::Graph& graph, const c10::FunctionSchema& schema, int given) {
  const auto& args = schema.arguments();  // args[0] is self
  const int count = static_cast<int>(args.size()) - 1;
  // Arguments without a default come first (Python's rule) and always stay
  // inputs: a spec that gives fewer is refused where it is read, by count.
  int required = 0;
  while (required < count && !args[required + 1].default_value()) ++required;
  given = std::max(given, required);
  for (int a = 0; a < std::min(given, count); ++a) {
    const c10::Argument& arg = args[a + 1];
    if (IsOptionalTensor(arg.type())) {
      graph.inputs()[a + 1]->setType(c10::TensorType::get());
    } else if (arg.type()->kind() != c10::TypeKind::TensorType) {
      throw InputError(Concat("forward's input '", arg.name(), "' is ", arg.type()->annotation_str(),
                              ", which an input spec cannot give (inputs must be tensors); give only the ", a,
                              " input(s) before it, and it takes its default"));
    }
  }
  torch::jit::WithInsertPoint at_start(graph.block()->param_node()->next());
  for (int a = count - 1; a >= given; --a) {
    const c10::Argument& arg = args[a + 1];
    torch::jit::Value* value = graph.insertConstant(*arg.default_value());
    graph.inputs()[a + 1]->replaceAllUsesWith(value);
    graph.eraseInput(a + 1);
  }
}

}  // namespace mp
