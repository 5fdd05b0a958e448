// SaveTrainedModel: serialise to memory with the training flag as loaded,
// then write the bytes with WriteFileAtomically.
#include "executor/save_model.h"

#include <sstream>

#include "common/atomic_file.h"

namespace mp {

void SaveTrainedModel(const ModelFile& model, const std::string& path,
                      const std::vector<std::string>& protected_paths) {
  CheckWritable(path, protected_paths);
  torch::jit::Module module = model.module;  // a handle: the same module
  const bool current = module.is_training();
  module.train(model.training);
  std::ostringstream bytes;
  torch::jit::ExtraFilesMap extra;
  if (!model.input_spec_json.empty()) extra[kInputSpecFile] = model.input_spec_json;
  try {
    module.save(bytes, extra);
  } catch (...) {
    module.train(current);
    throw;
  }
  module.train(current);  // the canonical graph does not read it, but leave it as found
  WriteFileAtomically(path, bytes.str(), protected_paths);
}

}  // namespace mp
