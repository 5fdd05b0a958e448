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

namespace {

// An argument's input names: its own, or one per element of a tuple.
std::vector<std::string> NamesOf(const c10::Argument& arg) {
  const size_t tuple = TensorTupleSize(arg.type());
  if (!tuple) return {arg.name()};
  std::vector<std::string> names;
  for (size_t e = 0; e < tuple; ++e) names.push_back(Concat(arg.name(), "[", e, "]"));
  return names;
}

bool Contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Which of forward's arguments (args[1...]) the spec gives, by count: the
// leading ones. Arguments without a default come first (Python's rule) and
// are always given: a spec with fewer tensors is refused where it is read.
std::vector<bool> GivenByCount(const std::vector<c10::Argument>& args, int count) {
  std::vector<bool> given(args.size() - 1, false);
  size_t a = 0;
  int tensors = 0;
  for (; a < given.size() && !args[a + 1].default_value(); ++a) tensors += TensorCount(args[a + 1]);
  for (; a < given.size() && tensors < count; ++a) tensors += TensorCount(args[a + 1]);
  std::fill(given.begin(), given.begin() + static_cast<std::ptrdiff_t>(a), true);
  return given;
}

// By name: a tuple's elements all or none, every argument without a
// default among them.
std::vector<bool> GivenByName(const std::vector<c10::Argument>& args, const std::vector<std::string>& names) {
  std::vector<bool> given(args.size() - 1, false);
  for (size_t a = 0; a < given.size(); ++a) {
    const c10::Argument& arg = args[a + 1];
    const auto own = NamesOf(arg);
    const auto named = std::count_if(own.begin(), own.end(), [&](const std::string& n) { return Contains(names, n); });
    if (named > 0 && static_cast<size_t>(named) < own.size()) {
      throw InputError(Concat("forward's input '", arg.name(), "' is a tuple of ", own.size(),
                              " tensors: give all of ", own.front(), " to ", own.back(), " or none"));
    }
    if (named == 0 && !arg.default_value()) {
      throw InputError(Concat("forward's input '", arg.name(), "' has no default: give it (the inputs named are ",
                              JoinNames(names), ")"));
    }
    given[a] = named > 0;
  }
  return given;
}

}  // namespace

std::vector<std::string> ModelInputNames(const c10::FunctionSchema& schema) {
  std::vector<std::string> names;
  for (size_t a = 1; a < schema.arguments().size(); ++a) {
    for (auto& name : NamesOf(schema.arguments()[a])) names.push_back(std::move(name));
  }
  return names;
}

std::vector<std::string> BindArguments(torch::jit::Graph& graph, const c10::FunctionSchema& schema,
                                       const GivenArguments& spec) {
  const auto& args = schema.arguments();  // args[0] is self
  const auto all = ModelInputNames(schema);
  const bool by_name = !spec.names.empty() && std::all_of(spec.names.begin(), spec.names.end(),
                                                          [&](const std::string& n) { return Contains(all, n); });
  const std::vector<bool> given = by_name ? GivenByName(args, spec.names) : GivenByCount(args, spec.count);
  for (size_t a = 0; a < given.size(); ++a) {
    const c10::Argument& arg = args[a + 1];
    if (!given[a]) continue;
    if (IsOptionalTensor(arg.type())) {
      graph.inputs()[a + 1]->setType(c10::TensorType::get());
    } else if (!SpecCanGive(arg.type())) {
      throw InputError(Concat("forward's input '", arg.name(), "' is ", arg.type()->annotation_str(),
                              ", which an input spec cannot give (inputs must be tensors); leave it out and it "
                              "takes its default (to give inputs after it, name them: --input NAME=dtype[...])"));
    }
  }
  {
    torch::jit::WithInsertPoint at_start(graph.block()->param_node()->next());
    for (size_t a = given.size(); a-- > 0;) {
      if (given[a]) continue;
      torch::jit::Value* value = graph.insertConstant(*args[a + 1].default_value());
      graph.inputs()[a + 1]->replaceAllUsesWith(value);
      graph.eraseInput(a + 1);
    }
  }
  // Graph input 1 + k is the k-th argument given; split the tuples last
  // first, so the earlier ones keep their places.
  std::vector<size_t> kept;
  for (size_t a = 0; a < given.size(); ++a) {
    if (given[a]) kept.push_back(a);
  }
  for (size_t k = kept.size(); k-- > 0;) {
    if (TensorTupleSize(args[kept[k] + 1].type())) SplitTuple(graph, k + 1, args[kept[k] + 1].name());
  }
  std::vector<std::string> names;
  for (size_t a : kept) {
    for (auto& name : NamesOf(args[a + 1])) names.push_back(std::move(name));
  }
  return names;
}

}  // namespace mp
