// Loading a TorchScript file, with an error for every way it can be wrong.
#pragma once

#include <torch/script.h>

#include <string>
#include <vector>

#include "planner/graph/input_spec.h"

namespace mp {

// Name of the TorchScript extra file that carries a model's input spec.
inline constexpr const char* kInputSpecFile = "mp_input_spec.json";

struct ModelFile {
  std::string path;
  torch::jit::Module module;
  std::vector<TensorSpec> input_spec;  // empty when the file carries none
  std::string input_spec_json;         // the spec as stored (kInputSpecFile), to write it back
  std::vector<bool> training;          // each module's training flag as loaded, modules() order
};

// The cheap checks LoadModelFile makes first, for a command that reads the
// file's bytes before loading it: exists, not a directory, readable, not
// empty, a complete zip archive. Throws InputError naming `path`.
void CheckModelFile(const std::string& path);

// Loads `path` on the CPU. Throws InputError when the file is missing,
// unreadable or empty, is not a complete zip archive, is a zip but not
// TorchScript, has no `forward` method, takes an input that is not a tensor
// (nor an Optional[Tensor] nor a tuple of tensors) and has no default
// value, returns something other than tensors (a dict, a string), or
// carries a malformed input spec.
ModelFile LoadModelFile(const std::string& path);

}  // namespace mp
