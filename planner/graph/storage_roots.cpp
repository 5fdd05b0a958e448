#include "planner/graph/storage_roots.h"

#include <vector>

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

bool IsContainer(const c10::TypePtr& type) {
  return type->kind() == c10::TypeKind::ListType || type->kind() == c10::TypeKind::DictType;
}

// The containers some node writes (append, _set_item, ...), inside blocks
// too: into `set_dicts` the dicts a top-level aten::_set_item writes, into
// `others` every container written any other way.
void ContainerWrites(const torch::jit::Block& block, bool top, std::set<const Value*>& set_dicts,
                     std::set<const Value*>& others) {
  for (const Node* node : block.nodes()) {
    for (const torch::jit::Block* inner : node->blocks()) ContainerWrites(*inner, false, set_dicts, others);
    const c10::FunctionSchema* schema = node->maybeSchema();
    if (!schema) continue;
    for (size_t i = 0; i < schema->arguments().size() && i < node->inputs().size(); ++i) {
      const c10::AliasInfo* alias = schema->arguments()[i].alias_info();
      if (!alias || !alias->isWrite() || !IsContainer(node->input(i)->type())) continue;
      const bool set_item = top && node->kind() == c10::aten::_set_item &&
                            node->input(i)->type()->kind() == c10::TypeKind::DictType;
      (set_item ? set_dicts : others).insert(node->input(i));
    }
  }
}

}  // namespace

StorageRoots::StorageRoots(const torch::jit::Graph& graph) {
  // A list that some node writes (append, setitem, ...) may hold storages
  // its construction did not show: no claim about it or what comes out of
  // it. A dict filled by _set_item at the top level (torchvision's
  // IntermediateLayerGetter) holds what was set into it so far; one written
  // any other way, no claim.
  ContainerWrites(*graph.block(), true, set_dicts_, written_);
  for (const Value* in : graph.inputs()) roots_[in] = std::set<const Value*>{in};
  Walk(*graph.block());
}

void StorageRoots::Walk(const torch::jit::Block& block) {
  for (const Node* node : block.nodes()) {
    // Inside an if or a loop the same rules hold; a block's inputs (loop
    // variables) and the if's or loop's own outputs get no claim.
    for (const torch::jit::Block* inner : node->blocks()) Walk(*inner);
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
    if (node->kind() == c10::aten::_set_item && set_dicts_.count(node->input(0)) && !written_.count(node->input(0))) {
      roots_[node->input(0)] = join(std::vector<const Value*>{node->input(0), node->input(2)});
    }
    const c10::FunctionSchema* schema = node->maybeSchema();
    const bool dict_in = !node->inputs().empty() && node->input(0)->type()->kind() == c10::TypeKind::DictType;
    for (size_t o = 0; o < node->outputs().size(); ++o) {
      const Value* out = node->outputs()[o];
      Roots roots;
      if (!HoldsTensors(out->type())) {
        roots = std::set<const Value*>{};  // no storage to share
      } else if (node->kind() == c10::prim::Constant) {
        roots = std::set<const Value*>{out};
      } else if (node->kind() == c10::prim::ListConstruct || node->kind() == c10::prim::DictConstruct) {
        roots = join(node->inputs());  // a dict's keys are strings: no storage
      } else if (node->kind() == c10::aten::dict && node->inputs().empty()) {
        roots = std::set<const Value*>{};  // {}: filled by _set_item, above
      } else if (node->kind() == c10::prim::ListUnpack || node->kind() == c10::prim::unchecked_cast ||
                 (node->kind() == c10::aten::__getitem__ &&
                  (node->input(0)->type()->kind() == c10::TypeKind::ListType || dict_in))) {
        roots = Of(node->input(0));
      } else if (out->type()->kind() == c10::TypeKind::DictType || dict_in) {
        roots = Roots();  // another dict op: no claim
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
      roots_[out] = written_.count(out) ? Roots() : roots;
    }
  }
}

StorageRoots::Roots StorageRoots::Of(const Value* value) const {
  auto it = roots_.find(value);
  return it == roots_.end() ? Roots() : it->second;
}

bool StorageRoots::WritesMiss(const Node* node, const Value* value) const {
  // An if or a loop writes what the nodes in its blocks write (AliasDb's
  // answer for it is theirs).
  if (!node->blocks().empty()) {
    for (const torch::jit::Block* block : node->blocks()) {
      for (const Node* inner : block->nodes()) {
        const bool writes_nothing = !inner->maybeSchema() && inner->blocks().empty() && inner->kind().is_prim();
        if (!writes_nothing && !WritesMiss(inner, value)) return false;
      }
    }
    return true;
  }
  const c10::FunctionSchema* schema = node->maybeSchema();
  if (!schema) return false;
  // A dict's roots are what it holds, not the dict: a _set_item into an
  // empty one writes it.
  if (value->type()->kind() == c10::TypeKind::DictType) return false;
  const Roots target = Of(value);
  if (!target) return false;
  const bool tensor = value->type()->kind() == c10::TypeKind::TensorType;
  for (size_t i = 0; i < schema->arguments().size() && i < node->inputs().size(); ++i) {
    const c10::AliasInfo* alias = schema->arguments()[i].alias_info();
    if (!alias || !alias->isWrite()) continue;
    // A write to a list or dict itself (append, _set_item) changes which
    // tensors it holds, not what they hold.
    if (tensor && IsContainer(node->input(i)->type())) continue;
    const Roots written = Of(node->input(i));
    if (!written) return false;
    for (const Value* root : *written)
      if (target->count(root)) return false;
  }
  return true;
}

}  // namespace mp
