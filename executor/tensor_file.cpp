// torch.save files through torch::jit::pickle_load / pickle_save, which read
// and write the zip format of torch.save (both LibTorch 1.13 and 2.x).
#include "executor/tensor_file.h"

#include <torch/csrc/jit/serialization/pickle.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <optional>
#include <string_view>

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/zip_end.h"
#include "planner/graph/run_graph.h"

namespace mp {

namespace {

// LibTorch 1.13's miniz scans back from the end for the zip end record in
// 4 KiB steps; on a file over 4 KiB with no record in its last 4 KiB the
// offset goes negative, and pickle_load's in-memory reader (no bounds check)
// copies from up to 64 KiB before the buffer: garbage, or a SEGV. torch.save
// puts the record at the very end, so such bytes are refused first.
constexpr size_t kPickleZipEndWindow = 4096;

constexpr const char* kTensorsHeld =
    "tensors saved with torch.save: a tensor, a tuple or list of them, or a dict of them by input name";

}  // namespace

c10::IValue LoadSaved(const std::string& path, const std::string& flag, const std::string& holds) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(Concat(flag, " ", path, ": no such file"));
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto unreadable = [&](const std::string& why) {
    return InputError(Concat(flag, " ", path, ": cannot read it as ", holds, " (", why, ")"));
  };
  if (!HasZipEndRecord(std::string_view(bytes.data(), bytes.size()), kPickleZipEndWindow)) {
    throw unreadable("not a zip archive");
  }
  try {
    return torch::jit::pickle_load(bytes);
  } catch (const std::exception& e) {
    // Python pickles a dict of one item with SETITEM (0x73), which LibTorch
    // 1.13's unpickler does not know (it reads SETITEMS, a dict of more).
    const std::string what = ErrorLine(e.what());
    const bool one_item_dict = what.find("Unknown opcode") != std::string::npos && what.find("0x73") != std::string::npos;
    throw unreadable(one_item_dict ? what + "; this LibTorch reads no dict of one item: save the tensor itself" : what);
  }
}

void SaveValue(const std::string& path, const c10::IValue& value, const std::vector<std::string>& protected_paths) {
  const std::vector<char> bytes = torch::jit::pickle_save(value);
  WriteFileAtomically(path, std::string(bytes.begin(), bytes.end()), protected_paths);
}

namespace {

// A dict's values in the plan's input order, by name: `hidden[0]` is
// element 0 of key `hidden` (a tuple or list) where the dict has no key of
// its own for it. Every input must be there, and nothing else: a key the
// plan has no input for (an attention_mask it was planned without) would
// otherwise be dropped without a word.
std::vector<c10::IValue> ByName(const c10::impl::GenericDict& dict, const std::string& path,
                                const std::vector<TensorSpec>& spec) {
  std::vector<std::string> names, used;
  for (const TensorSpec& s : spec) names.push_back(s.name);
  const auto find = [&](const std::string& key) -> std::optional<c10::IValue> {
    for (const auto& entry : dict) {
      if (entry.key().isString() && entry.key().toStringRef() == key) return entry.value();
    }
    return std::nullopt;
  };
  std::vector<c10::IValue> inputs;
  for (const std::string& name : names) {
    if (auto value = find(name)) {
      used.push_back(name);
      inputs.push_back(*value);
      continue;
    }
    if (const auto element = TupleElement(name)) {
      const auto& [base, index] = *element;
      if (auto value = find(base); value && (value->isTuple() || value->isList())) {
        const auto elements = value->isTuple() ? value->toTupleRef().elements().vec() : value->toListRef().vec();
        if (index < elements.size()) {
          used.push_back(base);
          inputs.push_back(elements[index]);
          continue;
        }
      }
    }
    throw InputError(Concat("--input ", path, ": the dict has no '", name, "' (the plan's inputs: ", JoinNames(names),
                            ")"));
  }
  for (const auto& entry : dict) {
    const std::string key = entry.key().isString() ? entry.key().toStringRef() : entry.key().tagKind();
    if (std::find(used.begin(), used.end(), key) == used.end()) {
      throw InputError(Concat("--input ", path, ": '", key, "' is not one of the plan's inputs (", JoinNames(names),
                              "); an input the plan was made without is not run: plan the model with it "
                              "(mpplan --input ", key, "=dtype[...]), or leave it out of the dict"));
    }
  }
  return inputs;
}

}  // namespace

at::Tensor LoadTensor(const std::string& path, const std::string& flag) {
  const c10::IValue loaded = LoadSaved(path, flag, kTensorsHeld);
  if (!loaded.isTensor()) throw InputError(Concat(flag, " ", path, ": a ", loaded.tagKind(), ", expected one tensor"));
  return loaded.toTensor();
}

std::vector<c10::IValue> LoadInputs(const std::string& path, const std::vector<TensorSpec>& spec) {
  const c10::IValue loaded = LoadSaved(path, "--input", kTensorsHeld);
  std::vector<c10::IValue> inputs;
  if (loaded.isGenericDict()) {
    inputs = ByName(loaded.toGenericDict(), path, spec);
  } else if (loaded.isTuple()) {
    for (const auto& v : loaded.toTupleRef().elements()) inputs.push_back(v);
  } else if (loaded.isList()) {
    for (const auto& v : loaded.toListRef()) inputs.push_back(v);
  } else {
    inputs.push_back(loaded);
  }
  if (inputs.size() != spec.size()) {
    throw InputError(Concat("--input ", path, ": ", inputs.size(), " values, the model takes ", spec.size(),
                            " (save a tuple with one tensor per input)"));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string which = Concat("--input ", path, ": input ", i, spec[i].name.empty() ? "" : " (" + spec[i].name + ")");
    if (!inputs[i].isTensor()) throw InputError(Concat(which, ": a ", inputs[i].tagKind(), ", expected a tensor"));
    const at::Tensor& t = inputs[i].toTensor();
    const std::string dtype = DtypeName(t.scalar_type());
    if (dtype != spec[i].dtype || t.sizes().vec() != spec[i].shape) {
      TensorSpec found{spec[i].name, dtype, t.sizes().vec()};
      throw InputError(Concat(which, ": ", FormatTensorSpec(found), ", the plan expects ", FormatTensorSpec(spec[i])));
    }
  }
  return inputs;
}

void SaveOutputs(const std::string& path, const std::vector<c10::IValue>& outputs,
                 const std::vector<std::string>& protected_paths) {
  SaveValue(path, outputs.size() == 1 ? outputs.front() : c10::ivalue::Tuple::create(outputs), protected_paths);
}

}  // namespace mp
