#include "planner/graph/storage_roots.h"

namespace mp {
namespace {

using torch::jit::Node;
using torch::jit::Value;

// Whether a value of this type can hold a tensor's storage.
bool HoldsTensors(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::TensorType) return true;
  for (const auto& contained : type->containedTypes())
    if (HoldsTensors(contained)) return true;
  return false;
}

bool HasAlias(const c10::AliasInfo* info) {
  if (!info) return false;
  if (!info->beforeSets().empty() || !info->afterSets().empty()) return true;
  for (const auto& contained : info->containedTypes())
    if (HasAlias(&contained)) return true;
  return false;
}

}  // namespace

StorageRoots::StorageRoots(const torch::jit::Graph& graph) {
  // A list that some node writes (append, setitem, ...) may hold storages
  // its construction did not show: no claim about it or what comes out of
  // it.
  std::set<const Value*> written_lists;
  for (const Node* node : graph.nodes()) {
    const c10::FunctionSchema* schema = node->maybeSchema();
    if (!schema) continue;
    for (size_t i = 0; i < schema->arguments().size() && i < node->inputs().size(); ++i) {
      const c10::AliasInfo* alias = schema->arguments()[i].alias_info();
      if (alias && alias->isWrite() && node->input(i)->type()->kind() == c10::TypeKind::ListType)
        written_lists.insert(node->input(i));
    }
  }
  for (const Value* in : graph.inputs()) roots_[in] = std::set<const Value*>{in};
  for (const Node* node : graph.nodes()) {
    // The union of the roots of `values`; nullopt if any is unknown.
    const auto join = [&](auto values) -> Roots {
      std::set<const Value*> all;
      for (const Value* v : values) {
        const Roots r = Of(v);
        if (!r) return std::nullopt;
        all.insert(r->begin(), r->end());
      }
      return all;
    };
    const c10::FunctionSchema* schema = node->maybeSchema();
    for (size_t o = 0; o < node->outputs().size(); ++o) {
      const Value* out = node->outputs()[o];
      Roots roots;
      if (!HoldsTensors(out->type())) {
        roots = std::set<const Value*>{};  // no storage to share
      } else if (node->kind() == c10::prim::Constant) {
        roots = std::set<const Value*>{out};
      } else if (node->kind() == c10::prim::ListConstruct) {
        roots = join(node->inputs());
      } else if (node->kind() == c10::prim::ListUnpack ||
                 (node->kind() == c10::aten::__getitem__ && node->input(0)->type()->kind() == c10::TypeKind::ListType)) {
        roots = Of(node->input(0));
      } else if (schema && node->blocks().empty() && o < schema->returns().size()) {
        if (!HasAlias(schema->returns()[o].alias_info())) {
          roots = std::set<const Value*>{out};  // fresh
        } else {
          // A view or an in-place result: every argument that carries an
          // alias set (more than the one it names: an over-approximation).
          std::vector<const Value*> aliased;
          for (size_t i = 0; i < schema->arguments().size() && i < node->inputs().size(); ++i)
            if (HasAlias(schema->arguments()[i].alias_info())) aliased.push_back(node->input(i));
          roots = aliased.empty() ? Roots() : join(aliased);
        }
      }
      roots_[out] = written_lists.count(out) ? Roots() : roots;
    }
  }
}

StorageRoots::Roots StorageRoots::Of(const Value* value) const {
  auto it = roots_.find(value);
  return it == roots_.end() ? Roots() : it->second;
}

bool StorageRoots::WritesMiss(const Node* node, const Value* value) const {
  const c10::FunctionSchema* schema = node->maybeSchema();
  if (!schema || !node->blocks().empty()) return false;
  const Roots target = Of(value);
  if (!target) return false;
  for (size_t i = 0; i < schema->arguments().size() && i < node->inputs().size(); ++i) {
    const c10::AliasInfo* alias = schema->arguments()[i].alias_info();
    if (!alias || !alias->isWrite()) continue;
    const Roots written = Of(node->input(i));
    if (!written) return false;
    for (const Value* root : *written)
      if (target->count(root)) return false;
  }
  return true;
}

}  // namespace mp
