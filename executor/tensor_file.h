// Tensors in and out of mpexec as files Python reads and writes with
// torch.save / torch.load: the model's inputs (one tensor, a tuple or list
// with one per input, or a dict of them by input name, as a Hugging Face
// batch is), labels, and its outputs.
#pragma once

#include <ATen/core/ivalue.h>

#include <string>
#include <vector>

#include "planner/graph/input_spec.h"

namespace mp {

// Reads `path` and checks each input against the plan's spec (dtype and
// shape); a dict's keys are the plan's input names, each once, no other.
// Throws InputError naming the file and the input.
std::vector<c10::IValue> LoadInputs(const std::string& path, const std::vector<TensorSpec>& spec);

// One tensor saved with torch.save (labels); InputError naming `flag` and
// the file otherwise.
at::Tensor LoadTensor(const std::string& path, const std::string& flag);

// Any value torch.save wrote; InputError "FLAG PATH: cannot read it as
// HOLDS (why)" where it cannot be read.
c10::IValue LoadSaved(const std::string& path, const std::string& flag, const std::string& holds);

// `value` as torch.save writes it, atomically, never over a file in
// `protected_paths`.
void SaveValue(const std::string& path, const c10::IValue& value, const std::vector<std::string>& protected_paths);

// Writes the outputs (one value, or a tuple of several) atomically, never
// over a file in `protected_paths`.
void SaveOutputs(const std::string& path, const std::vector<c10::IValue>& outputs,
                 const std::vector<std::string>& protected_paths);

}  // namespace mp
