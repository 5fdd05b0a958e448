// SaveTrainedModel: serialise to memory with the training flag as loaded,
// then write the bytes with WriteFileAtomically.
#include "executor/save_model.h"

#include <sstream>
#include <vector>

#include "common/atomic_file.h"

namespace mp {
namespace {

// Module::train recurses, so setting each module in modules() order (parents
// first) leaves every one with its own flag.
void SetTrainingFlags(const torch::jit::Module& module, const std::vector<bool>& flags) {
  size_t i = 0;
  for (auto m : module.modules()) {
    if (i < flags.size()) m.train(flags[i]);
    ++i;
  }
}

}  // namespace

void SaveTrainedModel(const ModelFile& model, const std::string& path,
                      const std::vector<std::string>& protected_paths) {
  CheckWritable(path, protected_paths);
  torch::jit::Module module = model.module;  // a handle: the same module
  std::vector<bool> current;
  for (const auto& m : module.modules()) current.push_back(m.is_training());
  SetTrainingFlags(module, model.training);
  std::ostringstream bytes;
  torch::jit::ExtraFilesMap extra;
  if (!model.input_spec_json.empty()) extra[kInputSpecFile] = model.input_spec_json;
  try {
    module.save(bytes, extra);
  } catch (...) {
    SetTrainingFlags(module, current);
    throw;
  }
  SetTrainingFlags(module, current);  // the canonical graph does not read them, but leave them as found
  WriteFileAtomically(path, bytes.str(), protected_paths);
}

}  // namespace mp
