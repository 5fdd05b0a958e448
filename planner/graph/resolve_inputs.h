// Which inputs a model is run on: the spec embedded in the model file, or
// the user's --input flags (one per model argument), optionally with the
// batch changed by --batch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/graph/canonical_graph.h"
#include "planner/graph/input_spec.h"
#include "planner/graph/model_file.h"

namespace mp {

// How many of forward's leading arguments the run gives (CanonicalOptions::
// given_inputs): one per --input flag, else the embedded spec's count, else
// -1 (every argument without a default).
int GivenInputs(const ModelFile& model, const std::vector<std::string>& flags);

// The embedded spec when `flags` is empty, else the flags parsed, with
// argument names, batch dimensions and integer value ranges taken from the
// embedded spec where it has them. Throws InputError naming the inputs
// that --input must cover when neither is usable.
std::vector<TensorSpec> ResolveInputs(const ModelFile& model, const CanonicalGraph& canonical,
                                      const std::vector<std::string>& flags);

}  // namespace mp
