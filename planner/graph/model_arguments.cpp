// BindArguments (model_arguments.h). Python callers leave trailing
// arguments out to take their defaults; an input spec (or --input, one per
// tensor) does the same by being shorter than forward's arguments. A
// default bound as a constant is folded by canonicalisation's
// ConstantPropagation (`if mask is None:` keeps one branch), so the graph
// is the one a call without the argument runs. A tuple argument becomes
// its elements, so every model input is a tensor that the spec describes,
// micro-batches split and stages send.
#include "planner/graph/model_arguments.h"

#include <algorithm>

#include "common/error.h"

namespace mp {

namespace {

bool IsOptionalTensor(const c10::TypePtr& type) {
  const auto optional = type->cast<c10::OptionalType>();
  return optional && optional->getElementType()->kind() == c10::TypeKind::TensorType;
}

// The element count of a tuple of tensors, else 0.
size_t TensorTupleSize(const c10::TypePtr& type) {
  const auto tuple = type->cast<c10::TupleType>();
  if (!tuple || tuple->elements().empty()) return 0;
  for (const auto& element : tuple->elements())
    if (element->kind() != c10::TypeKind::TensorType) return 0;
  return tuple->elements().size();
}

// How many tensors an argument takes from the spec.
int TensorCount(const c10::Argument& arg) {
  const size_t tuple = TensorTupleSize(arg.type());
  return tuple ? static_cast<int>(tuple) : 1;
}

// Replaces graph input `index` (a tuple of tensors) by one input per
// element, tupled again where the graph starts.
void SplitTuple(torch::jit::Graph& graph, size_t index, const std::string& name) {
  torch::jit::Value* tuple = graph.inputs()[index];
  const auto elements = tuple->type()->expect<c10::TupleType>()->elements();
  std::vector<torch::jit::Value*> parts;
  for (size_t e = 0; e < elements.size(); ++e) {
    torch::jit::Value* part = graph.insertInput(index + 1 + e, Concat(name, "_", e));
    part->setType(elements[e]);
    parts.push_back(part);
  }
  torch::jit::WithInsertPoint at_start(graph.block()->param_node()->next());
  torch::jit::Value* joined = graph.insertNode(graph.createTuple(parts))->output();
  tuple->replaceAllUsesWith(joined);
  graph.eraseInput(index);
}

}  // namespace

bool SpecCanGive(const c10::TypePtr& type) {
  return type->kind() == c10::TypeKind::TensorType || IsOptionalTensor(type) || TensorTupleSize(type) > 0;
}

std::vector<std::string> BindArguments(torch::jit::Graph& graph, const c10::FunctionSchema& schema, int given) {
  const auto& args = schema.arguments();  // args[0] is self
  const int count = static_cast<int>(args.size()) - 1;
  // Arguments without a default come first (Python's rule) and are always
  // covered: a spec that gives fewer tensors is refused where it is read,
  // by count. The rest are covered while the spec has tensors for them.
  int covered = 0, tensors = 0;
  while (covered < count && !args[covered + 1].default_value()) tensors += TensorCount(args[++covered]);
  while (covered < count && tensors < given) tensors += TensorCount(args[++covered]);
  for (int a = 0; a < covered; ++a) {
    const c10::Argument& arg = args[a + 1];
    if (IsOptionalTensor(arg.type())) {
      graph.inputs()[a + 1]->setType(c10::TensorType::get());
    } else if (!SpecCanGive(arg.type())) {
      throw InputError(Concat("forward's input '", arg.name(), "' is ", arg.type()->annotation_str(),
                              ", which an input spec cannot give (inputs must be tensors); give only the inputs "
                              "before it, and it takes its default"));
    }
  }
  {
    torch::jit::WithInsertPoint at_start(graph.block()->param_node()->next());
    for (int a = count - 1; a >= covered; --a) {
      torch::jit::Value* value = graph.insertConstant(*args[a + 1].default_value());
      graph.inputs()[a + 1]->replaceAllUsesWith(value);
      graph.eraseInput(a + 1);
    }
  }
  std::vector<std::string> names;
  for (int a = covered - 1; a >= 0; --a) {
    if (TensorTupleSize(args[a + 1].type())) SplitTuple(graph, a + 1, args[a + 1].name());
  }
  for (int a = 0; a < covered; ++a) {
    const size_t tuple = TensorTupleSize(args[a + 1].type());
    if (!tuple) names.push_back(args[a + 1].name());
    for (size_t e = 0; e < tuple; ++e) names.push_back(Concat(args[a + 1].name(), "[", e, "]"));
  }
  return names;
}

}  // namespace mp
