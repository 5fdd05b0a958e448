// ResolveInputs: the model's inputs from its embedded spec or --input.
#include "planner/graph/resolve_inputs.h"

#include <algorithm>

#include "common/error.h"

namespace mp {
namespace {

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// Integer inputs read as embedding indices draw from [0, rows of the table),
// so synthetic token ids never index past it.
void RangeFromEmbeddings(const CanonicalGraph& canonical, std::vector<TensorSpec>& specs) {
  const auto inputs = canonical.graph->inputs();
  for (size_t i = 0; i < specs.size() && i < canonical.num_model_inputs; ++i) {
    TensorSpec& spec = specs[i];
    if (spec.has_range || !IsIntegerDtype(spec.dtype)) continue;
    for (const torch::jit::Use& use : inputs[i]->uses()) {
      const torch::jit::Node* node = use.user;
      if (node->kind() != c10::aten::embedding || use.offset != 1) continue;
      const torch::jit::Value* table = node->input(0);
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

// Named --input flags (name=dtype[...]) in forward's order: every input
// named once, each one of the `names` the flags' count covers (forward's
// leading arguments; the rest take their defaults). Unnamed flags are in
// that order already; a mix is refused.
std::vector<TensorSpec> InForwardOrder(std::vector<TensorSpec> specs, const std::vector<std::string>& names) {
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
    if (std::find(names.begin(), names.end(), spec.name) == names.end()) {
      throw InputError(Concat("--input ", spec.name, "=", FormatTensorSpec(spec), ": '", spec.name,
                              "' is not one of forward's first ", names.size(), " inputs (", JoinNames(names),
                              "); --input gives forward's leading inputs, those after take their defaults"));
    }
  }
  std::vector<TensorSpec> ordered;
  for (const std::string& name : names) {
    ordered.push_back(*std::find_if(specs.begin(), specs.end(), [&](const TensorSpec& s) { return s.name == name; }));
  }
  return ordered;
}

}  // namespace

int GivenInputs(const ModelFile& model, const std::vector<std::string>& flags) {
  if (!flags.empty()) return static_cast<int>(flags.size());
  return model.input_spec.empty() ? -1 : static_cast<int>(model.input_spec.size());
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
    std::vector<TensorSpec> specs = model.input_spec;
    RangeFromEmbeddings(canonical, specs);
    return specs;
  }
  if (flags.size() != expected) {
    throw InputError(Concat("--input: the model takes ", expected, " inputs (", JoinNames(canonical.input_names),
                            "), given ", flags.size()));
  }
  std::vector<TensorSpec> parsed;
  for (const std::string& flag : flags) parsed.push_back(ParseTensorSpec(flag));
  parsed = InForwardOrder(std::move(parsed), canonical.input_names);
  std::vector<TensorSpec> specs;
  for (size_t i = 0; i < flags.size(); ++i) {
    TensorSpec spec = parsed[i];
    spec.name = canonical.input_names[i];
    if (i < model.input_spec.size()) {
      const auto& embedded = model.input_spec[i];
      spec.batch_dim = embedded.batch_dim;
      if (embedded.has_range && IsIntegerDtype(spec.dtype)) {
        spec.has_range = true;
        spec.low = embedded.low;
        spec.high = embedded.high;
      }
    }
    specs.push_back(spec);
  }
  RangeFromEmbeddings(canonical, specs);
  return specs;
}

}  // namespace mp
