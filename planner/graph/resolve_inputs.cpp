// ResolveInputs: the model's inputs from its embedded spec or --input.
#include "planner/graph/resolve_inputs.h"

#include "common/error.h"

namespace mp {
namespace {

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

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
    return model.input_spec;
  }
  if (flags.size() != expected) {
    throw InputError(Concat("--input given ", flags.size(), " times, model takes ", expected,
                            " inputs (", JoinNames(canonical.input_names), ")"));
  }
  std::vector<TensorSpec> specs;
  for (size_t i = 0; i < flags.size(); ++i) {
    TensorSpec spec = ParseTensorSpec(flags[i]);
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
  return specs;
}

}  // namespace mp
