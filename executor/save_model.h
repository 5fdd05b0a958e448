// Keeping what training produced: the model written back as TorchScript.
#pragma once

#include <string>
#include <vector>

#include "planner/graph/model_file.h"

namespace mp {

// Writes `model`'s module, whose tensors the pipeline trained in place, as a
// TorchScript file of the same structure (torch.jit.load reads it, as does
// mpplan: the input spec is kept) with the training flag it was loaded
// with. Atomic, and never over a file in `protected_paths` (the model and
// the plan being run): InputError.
void SaveTrainedModel(const ModelFile& model, const std::string& path,
                      const std::vector<std::string>& protected_paths);

}  // namespace mp
