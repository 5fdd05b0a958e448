// Which inputs a model is run on: the spec embedded in the model file, or
// the user's --input flags (one per model input), optionally with the
// batch changed by --batch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/graph/canonical_graph.h"
#include "planner/graph/input_spec.h"
#include "planner/graph/model_file.h"

namespace mp {

// Which of forward's arguments the run gives (CanonicalOptions::given):
// the --input flags' count and names (name=dtype[...]), else the embedded
// spec's, else every argument without a default.
GivenArguments InputsGiven(const ModelFile& model, const std::vector<std::string>& flags);

// The embedded spec when `flags` is empty, else the flags parsed, with
// argument names, batch dimensions and integer value ranges taken from the
// embedded spec where it has them. Throws InputError naming the inputs
// that --input must cover when neither is usable.
std::vector<TensorSpec> ResolveInputs(const ModelFile& model, const CanonicalGraph& canonical,
                                      const std::vector<std::string>& flags);

}  // namespace mp
