// ResolveInputs: the model's inputs from its embedded spec or --input.
#include "planner/graph/resolve_inputs.h"

#include <algorithm>
#include <optional>

#include "common/error.h"

namespace mp {
namespace {

// The embedding tables a value indexes (aten::embedding's second input),
// through the casts an Optional[Tensor] given leaves (prim::unchecked_cast).
void TablesIndexedBy(const torch::jit::Value* value, std::vector<const torch::jit::Value*>& tables) {
  for (const torch::jit::Use& use : value->uses()) {
    const torch::jit::Node* node = use.user;
    if (node->kind() == c10::prim::unchecked_cast) TablesIndexedBy(node->output(), tables);
    if (node->kind() == c10::aten::embedding && use.offset == 1) tables.push_back(node->input(0));
  }
}

// Integer inputs read as embedding indices draw from [0, rows of the table),
// so synthetic token ids never index past it.
void RangeFromEmbeddings(const CanonicalGraph& canonical, std::vector<TensorSpec>& specs) {
  const auto inputs = canonical.graph->inputs();
  for (size_t i = 0; i < specs.size() && i < canonical.num_model_inputs; ++i) {
    TensorSpec& spec = specs[i];
    if (spec.has_range || !IsIntegerDtype(spec.dtype)) continue;
    std::vector<const torch::jit::Value*> tables;
    TablesIndexedBy(inputs[i], tables);
    for (const torch::jit::Value* table : tables) {
      if (table->node()->kind() != c10::prim::Param) continue;
      const size_t param = table->offset() - canonical.num_model_inputs;
      if (table->offset() < canonical.num_model_inputs || param >= canonical.params.size()) continue;
      const int64_t rows = canonical.params[param].tensor.size(0);
      if (!spec.has_range || rows < spec.high) {
        spec.has_range = true;
        spec.low = 0;
        spec.high = rows;
      }
    }
  }
}

std::vector<std::string> ForwardInputNames(const ModelFile& model) {
  return ModelInputNames(model.module.get_method("forward").function().getSchema());
}

const TensorSpec* Named(const std::vector<TensorSpec>& specs, const std::string& name) {
  const auto it = std::find_if(specs.begin(), specs.end(), [&](const TensorSpec& s) { return s.name == name; });
  return it == specs.end() ? nullptr : &*it;
}

// `specs` in the order of `names`, one each by name; nullopt where one of
// the names has none.
std::optional<std::vector<TensorSpec>> OrderedBy(const std::vector<TensorSpec>& specs,
                                                 const std::vector<std::string>& names) {
  std::vector<TensorSpec> ordered;
  for (const std::string& name : names) {
    const TensorSpec* found = Named(specs, name);
    if (!found) return std::nullopt;
    ordered.push_back(*found);
  }
  return ordered;
}

// Named --input flags in forward's order (`names`, the inputs the graph was
// bound to: BindArguments took the flags' names where all are forward's).
// Unnamed flags are in that order already; a mix is refused, and so is a
// name given twice or one that is not forward's (`forward`: every name).
std::vector<TensorSpec> InForwardOrder(const std::vector<TensorSpec>& specs, const std::vector<std::string>& names,
                                       const std::vector<std::string>& forward) {
  size_t named = 0;
  for (const TensorSpec& spec : specs) named += !spec.name.empty();
  if (named == 0) return specs;
  if (named != specs.size()) {
    throw InputError(Concat("--input: name every input or none (", named, " of ", specs.size(), " named)"));
  }
  for (const TensorSpec& spec : specs) {
    const auto same = [&](const TensorSpec& s) { return s.name == spec.name; };
    const auto count = std::count_if(specs.begin(), specs.end(), same);
    if (count > 1) throw InputError(Concat("--input ", spec.name, "=...: given ", count, " times"));
    if (std::find(forward.begin(), forward.end(), spec.name) == forward.end()) {
      throw InputError(Concat("--input ", spec.name, "=", FormatTensorSpec(spec), ": '", spec.name,
                              "' is not one of forward's inputs (", JoinNames(forward), ")"));
    }
  }
  for (const std::string& name : names) {
    if (!Named(specs, name)) throw InputError(Concat("--input: forward's input '", name, "' is not given"));
  }
  return *OrderedBy(specs, names);
}

// The embedded spec's entry for forward's input `name`, the i-th given: by
// name, or by place where the spec's names are not forward's (lraspp's `x`
// for torchvision's `input`).
const TensorSpec* EmbeddedFor(const std::vector<TensorSpec>& embedded, const std::vector<std::string>& forward,
                              const std::string& name, size_t i) {
  if (const TensorSpec* found = Named(embedded, name)) return found;
  const bool positional = i < embedded.size() &&
                          std::find(forward.begin(), forward.end(), embedded[i].name) == forward.end();
  return positional ? &embedded[i] : nullptr;
}

}  // namespace

GivenArguments InputsGiven(const ModelFile& model, const std::vector<std::string>& flags) {
  GivenArguments given;
  if (!flags.empty()) {
    given.count = static_cast<int>(flags.size());
    for (const std::string& flag : flags) given.names.push_back(ParseTensorSpec(flag).name);
    // Unnamed, or a mix (ResolveInputs refuses it): by count.
    if (std::count(given.names.begin(), given.names.end(), "") > 0) given.names.clear();
  } else if (!model.input_spec.empty()) {
    given.count = static_cast<int>(model.input_spec.size());
    for (const TensorSpec& spec : model.input_spec) given.names.push_back(spec.name);
  }
  return given;
}

std::vector<TensorSpec> ResolveInputs(const ModelFile& model, const CanonicalGraph& canonical,
                                      const std::vector<std::string>& flags) {
  const size_t expected = canonical.num_model_inputs;
  if (flags.empty()) {
    if (model.input_spec.empty()) {
      throw InputError(Concat(model.path, ": model carries no input spec; give one --input "
                              "dtype[d0,...] per model input (", JoinNames(canonical.input_names), ")"));
    }
    if (model.input_spec.size() != expected) {
      throw InputError(Concat(model.path, ": embedded input spec has ", model.input_spec.size(),
                              " inputs, forward takes ", expected));
    }
    // In forward's order where its names are the inputs' (BindArguments
    // bound them by name); a spec of other names is positional.
    std::vector<TensorSpec> specs = OrderedBy(model.input_spec, canonical.input_names).value_or(model.input_spec);
    RangeFromEmbeddings(canonical, specs);
    return specs;
  }
  std::vector<TensorSpec> parsed;
  for (const std::string& flag : flags) parsed.push_back(ParseTensorSpec(flag));
  const std::vector<std::string> forward = ForwardInputNames(model);
  parsed = InForwardOrder(parsed, canonical.input_names, forward);
  if (parsed.size() != expected) {
    throw InputError(Concat("--input: the model takes ", expected, " inputs (", JoinNames(canonical.input_names),
                            "), given ", flags.size()));
  }
  std::vector<TensorSpec> specs;
  for (size_t i = 0; i < parsed.size(); ++i) {
    TensorSpec spec = parsed[i];
    spec.name = canonical.input_names[i];
    const TensorSpec* from = EmbeddedFor(model.input_spec, forward, spec.name, i);
    if (from) {
      spec.batch_dim = from->batch_dim;
      if (from->has_range && IsIntegerDtype(spec.dtype)) {
        spec.has_range = true;
        spec.low = from->low;
        spec.high = from->high;
      }
    }
    specs.push_back(spec);
  }
  RangeFromEmbeddings(canonical, specs);
  return specs;
}

}  // namespace mp
