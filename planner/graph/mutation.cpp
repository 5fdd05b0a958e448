// Mutation analysis for cutting. A value that is written in place has
// versions: version k is its content after the k-th writer (in canonical
// order). A reader in another stage must receive the version it would
// have seen in the uncut graph, so the cutter keys boundary values by
// (value, version). AliasDb tells which values a node's writes may reach.
#include "planner/graph/mutation.h"

#include <torch/csrc/jit/ir/alias_analysis.h>

#include <algorithm>

#include "planner/graph/canonical_graph.h"
#include "planner/graph/storage_roots.h"

namespace mp {
namespace {

using torch::jit::Node;
using torch::jit::Value;

void CollectNodes(Node* node, std::vector<Node*>& out) {
  out.push_back(node);
  for (auto* block : node->blocks()) {
    for (Node* inner : block->nodes()) CollectNodes(inner, out);
  }
}

}  // namespace

std::string WritingOp(const torch::jit::Node* node) {
  if (const auto* schema = node->maybeSchema(); schema && schema->is_mutable()) return node->kind().toQualString();
  for (const auto* block : node->blocks()) {
    for (const Node* inner : block->nodes()) {
      if (std::string op = WritingOp(inner); !op.empty()) return op;
    }
  }
  return "";
}

torch::jit::Value* AliasRoot(torch::jit::Value* v) {
  for (;;) {
    torch::jit::Node* node = v->node();
    // A piece of a chunk or split: the list it came out of, and on to the
    // tensor that list views (the op's schema says whether it does). Not
    // a list built of several tensors, nor a list the graph was given.
    if (node->kind() == c10::prim::ListUnpack && node->input(0)->node()->maybeSchema()) {
      v = node->input(0);
      continue;
    }
    const auto* schema = node->maybeSchema();
    if (!schema || node->outputs().size() != 1 || schema->returns().empty() ||
        !schema->returns()[0].alias_info() || schema->arguments().empty() ||
        !schema->arguments()[0].alias_info() || node->inputs().empty()) {
      return v;
    }
    v = node->input(0);
  }
}

namespace {

// AliasDb lets every graph input of a type alias every other (a caller
// could pass one tensor twice), so a write to one parameter would count as a
// write to all: BatchNorm's num_batches_tracked.add_ in training would
// version every weight. Parameters and buffers are distinct tensors (tied
// ones are one input), so a write whose storage root is a graph input
// writes that input only. Where the root is not a graph input (a value out
// of a list or tuple, an If's output), AliasDb's cautious answer stands. A
// node with blocks is judged by the nodes inside it, which the caller
// checks one by one.
bool WritesInput(Node* inner, Value* input, const torch::jit::AliasDb& alias_db) {
  const auto* schema = inner->maybeSchema();
  if (!schema) return inner->blocks().empty() && alias_db.writesToAlias(inner, {input});
  for (size_t i = 0; i < schema->arguments().size() && i < inner->inputs().size(); ++i) {
    const auto* alias = schema->arguments()[i].alias_info();
    if (!alias || !alias->isWrite()) continue;
    const Value* root = AliasRoot(inner->input(i));
    if (root == input) return true;
    if (root->node()->kind() != c10::prim::Param && alias_db.writesToAlias(inner, {input})) return true;
  }
  return false;
}

}  // namespace

const std::vector<int>& MutationInfo::WritersOf(const Value* value) const {
  static const std::vector<int> none;
  auto it = writers.find(value);
  return it == writers.end() ? none : it->second;
}

int MutationInfo::VersionAt(const Value* value, int node_id) const {
  const auto& list = WritersOf(value);
  return static_cast<int>(std::lower_bound(list.begin(), list.end(), node_id) - list.begin());
}

int MutationInfo::FinalVersion(const Value* value) const {
  return static_cast<int>(WritersOf(value).size());
}

MutationInfo AnalyzeMutation(const CanonicalGraph& canonical) {
  MutationInfo info;
  auto& graph = *canonical.graph;
  std::vector<int> writer_ids;
  for (Node* node : graph.nodes()) {
    if (!WritingOp(node).empty()) writer_ids.push_back(canonical.NodeId(node));
  }

  // Candidate values: graph inputs and top-level outputs.
  std::vector<Value*> values(graph.inputs().begin(), graph.inputs().end());
  for (Node* node : graph.nodes()) {
    for (Value* out : node->outputs()) values.push_back(out);
  }

  if (!writer_ids.empty()) {
    torch::jit::AliasDb alias_db(canonical.graph);
    const StorageRoots structure(*canonical.graph);
    for (int id : writer_ids) {
      std::vector<Node*> subtree;
      CollectNodes(canonical.nodes[id], subtree);
      for (Value* value : values) {
        // Only writes after a value exists change it; an in-place op's own
        // output already holds the written contents.
        const bool input = value->node() == graph.param_node();
        if (!input && canonical.NodeId(value->node()) >= id) continue;
        for (Node* inner : subtree) {
          // Where the structure shows the write cannot reach the value,
          // AliasDb's wildcard answer is overruled (storage_roots.h): for a
          // parameter too, which AliasDb lets alias every tensor that went
          // into a list or dict (LR-ASPP's hardswish_ on a backbone output
          // that its IntermediateLayerGetter then put in its OrderedDict
          // "wrote" every weight of the model).
          const bool writes = (input ? WritesInput(inner, value, alias_db) : alias_db.writesToAlias(inner, {value})) &&
                              !structure.WritesMiss(inner, value);
          if (writes) {
            info.writers[value].push_back(id);
            break;
          }
        }
      }
    }
  }

  // Graph inputs themselves are sent, not rebuilt; a pack of them is rebuilt,
  // and so is a random op's generator, which cannot be sent.
  static const c10::Symbol generator = c10::Symbol::fromQualString("mp::generator");
  for (Node* node : graph.nodes()) {
    const bool constant = node->kind() == c10::prim::Constant || node->kind() == generator;
    const bool pack = node->kind() == c10::prim::ListConstruct ||
                      node->kind() == c10::prim::TupleConstruct;
    if (!constant && !pack) continue;
    bool parts_ok = true;
    for (Value* in : node->inputs()) {
      const bool graph_input = in->node() == graph.param_node();
      parts_ok = parts_ok && (graph_input || info.rematerializable.count(in));
    }
    if (parts_ok && !info.writers.count(node->output())) info.rematerializable.insert(node->output());
  }
  return info;
}

}  // namespace mp
