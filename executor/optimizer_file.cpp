// SaveOptimizerState, LoadOptimizerState: through tensor_file's torch.save
// reader and writer.
#include "executor/optimizer_file.h"

#include <map>

#include "common/error.h"
#include "executor/tensor_file.h"

namespace mp {

void SaveOptimizerState(const std::string& path, const Optimizer& optimizer, const CanonicalGraph& canonical,
                        const std::vector<std::string>& protected_paths) {
  c10::impl::GenericDict state(c10::StringType::get(), c10::AnyType::get());
  for (size_t i = 0; i < canonical.params.size(); ++i) {
    const c10::IValue one = optimizer.StateOf(i);
    if (!one.isNone()) state.insert(canonical.params[i].name, one);
  }
  c10::impl::GenericDict file(c10::StringType::get(), c10::AnyType::get());
  file.insert("optimizer", optimizer.settings().Name());
  file.insert("state", state);
  SaveValue(path, file, protected_paths);
}

void LoadOptimizerState(const std::string& path, Optimizer& optimizer, const CanonicalGraph& canonical,
                        const std::vector<bool>& held) {
  const std::string flag = "--load-optimizer " + path;
  const c10::IValue loaded = LoadSaved(path, "--load-optimizer", "optimizer state mpexec --save-optimizer wrote");
  const auto entry = [&](const c10::impl::GenericDict& dict, const std::string& key) {
    const auto it = dict.find(key);
    if (it == dict.end()) throw InputError(Concat(flag, ": no '", key, "' (mpexec --save-optimizer writes it)"));
    return it->value();
  };
  if (!loaded.isGenericDict()) throw InputError(Concat(flag, ": expected a dict of optimizer and state"));
  const c10::impl::GenericDict file = loaded.toGenericDict();
  const c10::IValue name = entry(file, "optimizer");
  const std::string runs = optimizer.settings().Name();
  if (!name.isString() || name.toStringRef() != runs) {
    throw InputError(Concat(flag, ": the state of ", name.isString() ? name.toStringRef() : "?", ", this run's optimizer is ",
                            runs, " (mpexec --optimizer)"));
  }
  const c10::IValue state = entry(file, "state");
  if (!state.isGenericDict()) throw InputError(Concat(flag, ": state: expected a dict by parameter name"));
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < canonical.params.size(); ++i) index[canonical.params[i].name] = i;
  for (const auto& item : state.toGenericDict()) {
    const std::string key = item.key().isString() ? item.key().toStringRef() : "?";
    const auto it = index.find(key);
    if (it == index.end()) throw InputError(Concat(flag, ": state for '", key, "', which the model has no parameter of"));
    const bool keep = held.empty() || held.at(it->second);  // else another rank steps it: checked only
    optimizer.SetState(it->second, item.value(), canonical.params[it->second].tensor, Concat(flag, ": ", key), keep);
  }
}

}  // namespace mp
