// Loads TorchScript files. torch::jit::load reports a bad file with a long
// c10::Error and a C++ stack trace; we check the cheap things first (exists,
// readable, non-empty, zip magic) so the common mistakes get a one-line
// message, then keep only the first line of whatever LibTorch still throws.
#include "planner/graph/model_file.h"

#include <caffe2/serialize/inline_container.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "common/error.h"
#include "common/zip_end.h"
#include "planner/graph/model_arguments.h"
#include "planner/graph/run_graph.h"

namespace mp {

namespace {

// The end of the file, where a complete zip keeps its end record.
std::string FileTail(const std::string& path, std::streamoff length) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  const std::streamoff size = in.tellg();
  const std::streamoff tail = std::min<std::streamoff>(size, length);
  std::string bytes(static_cast<size_t>(tail), '\0');
  in.seekg(size - tail);
  in.read(bytes.data(), tail);
  return in ? bytes : std::string();
}

// True for a tensor, or tuples (named too), lists and string-keyed dicts
// of them, however nested, members that may be None among them
// (torchvision's GoogLeNet and Inception v3 return their auxiliary logits
// as Optional[Tensor], None outside training; its segmentation models a
// Dict[str, Tensor] of "out" and "aux").
bool TensorsOnly(const c10::TypePtr& type) {
  switch (type->kind()) {
    case c10::TypeKind::TensorType:
    case c10::TypeKind::NoneType:
      return true;
    case c10::TypeKind::DictType:
      return type->castRaw<c10::DictType>()->getKeyType()->kind() == c10::TypeKind::StringType &&
             TensorsOnly(type->castRaw<c10::DictType>()->getValueType());
    case c10::TypeKind::OptionalType:
    case c10::TypeKind::TupleType:
    case c10::TypeKind::ListType:
      for (const auto& contained : type->containedTypes()) {
        if (!TensorsOnly(contained)) return false;
      }
      return true;
    default:
      return false;
  }
}

// True where a tensor may be among them: a return of None alone carries nothing.
bool HoldsTensor(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::TensorType) return true;
  const auto contained = type->containedTypes();
  return std::any_of(contained.begin(), contained.end(), [](const c10::TypePtr& t) { return HoldsTensor(t); });
}

// Inputs are what an input spec describes: tensors (an Optional[Tensor]
// given one, a tuple of tensors given one per element), or arguments it
// leaves out, which take their defaults (canonicalisation's
// BindArguments). Outputs are tensors,
// or tuples and lists of them, any of them None (what the pipeline carries
// and compares).
void CheckForwardTypes(const torch::jit::Module& module, const std::string& path) {
  const c10::FunctionSchema& schema = module.get_method("forward").function().getSchema();
  // The first argument is the module, whatever Python named it (`self` by
  // convention; `forward(s, x)` is legal too).
  for (size_t i = 1; i < schema.arguments().size(); ++i) {
    const c10::Argument& arg = schema.arguments()[i];
    if (!SpecCanGive(arg.type()) && !arg.default_value()) {
      throw InputError(Concat(path, ": forward's input '", arg.name(), "' is ", arg.type()->annotation_str(),
                              ", not supported (inputs must be tensors or tuples of them, or have a default value)"));
    }
  }
  for (const c10::Argument& ret : schema.returns()) {
    if (!TensorsOnly(ret.type())) {
      throw InputError(Concat(path, ": forward returns ", ret.type()->annotation_str(),
                              ", not supported (outputs must be tensors, or tuples, lists or "
                              "Dict[str, ...] of tensors, any of them None)"));
    }
    if (!HoldsTensor(ret.type())) {
      throw InputError(Concat(path, ": forward returns ", ret.type()->annotation_str(),
                              ", no tensor: nothing to pipeline or train on"));
    }
  }
}

}  // namespace

void CheckModelFile(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw InputError(Concat(path, ": no such file"));
  if (fs::is_directory(path, ec)) throw InputError(Concat(path, ": is a directory, expected a TorchScript model file"));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(Concat(path, ": cannot be read (permission denied?)"));
  char magic[4] = {0, 0, 0, 0};
  in.read(magic, 4);
  if (in.gcount() == 0) throw InputError(Concat(path, ": file is empty"));
  if (in.gcount() < 4 || magic[0] != 'P' || magic[1] != 'K' || magic[2] != 3 || magic[3] != 4) {
    throw InputError(Concat(path, ": not a TorchScript file (not a zip archive; save it with "
                                  "torch.jit.save, not torch.save of a state dict)"));
  }
  if (!HasZipEndRecord(FileTail(path, kZipEndWindow))) {
    throw InputError(Concat(path, ": damaged zip archive (no end of central directory: truncated?)"));
  }
}

ModelFile LoadModelFile(const std::string& path) {
  CheckModelFile(path);
  // torch.save archives are zips too; TorchScript ones also hold code/.
  bool has_code = false;
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    for (const auto& record : reader.getAllRecords()) has_code |= record.rfind("code/", 0) == 0;
  } catch (const std::exception& e) {
    throw InputError(Concat(path, ": zip archive but not TorchScript (", ErrorLine(e.what()), ")"));
  }
  if (!has_code) {
    throw InputError(Concat(path, ": zip archive but not TorchScript (no code/; torch.save output? "
                                  "export with torch.jit.script or torch.jit.trace and torch.jit.save)"));
  }

  ModelFile model;
  model.path = path;
  torch::jit::ExtraFilesMap extra{{kInputSpecFile, ""}};
  try {
    model.module = torch::jit::load(path, torch::kCPU, extra);
  } catch (const std::exception& e) {
    throw InputError(Concat(path, ": zip archive but not a loadable TorchScript model (",
                            ErrorLine(e.what()), ")"));
  }
  if (!model.module.find_method("forward")) {
    throw InputError(Concat(path, ": TorchScript module has no forward method"));
  }
  CheckForwardTypes(model.module, path);
  for (const auto& m : model.module.modules()) model.training.push_back(m.is_training());
  model.input_spec_json = extra[kInputSpecFile];
  if (!extra[kInputSpecFile].empty()) {
    model.input_spec = ParseSpecJson(extra[kInputSpecFile], Concat(path, ": ", kInputSpecFile));
  }
  return model;
}

}  // namespace mp
