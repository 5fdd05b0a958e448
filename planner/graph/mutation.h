// Which values are written in place, and by which nodes.
#pragma once

#include <torch/script.h>

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace mp {

struct CanonicalGraph;

struct MutationInfo {
  // For every value that some top-level node writes (directly or through an
  // alias such as a view), the ids of those nodes, ascending.
  std::unordered_map<const torch::jit::Value*, std::vector<int>> writers;
  // Values that are cheaper to rebuild than to send: constants, random
  // ops' generators (mp::generator of a constant), and lists or tuples
  // built only from constants and graph inputs, never written.
  std::unordered_set<const torch::jit::Value*> rematerializable;

  const std::vector<int>& WritersOf(const torch::jit::Value* value) const;
  // How many writers of `value` come before node `node_id`: the version of
  // the value that node sees. A writer sees the version before its write.
  int VersionAt(const torch::jit::Value* value, int node_id) const;
  int FinalVersion(const torch::jit::Value* value) const;
};

// Follows outputs that alias an input (views, in-place results, the pieces
// of a chunk or split) back to the value that owns the storage.
torch::jit::Value* AliasRoot(torch::jit::Value* v);

// The op of `node`, or of the first node in its blocks, whose schema
// writes in place (an if's masked_fill_); "" where none does: what makes
// a node one of AnalyzeMutation's writers.
std::string WritingOp(const torch::jit::Node* node);

// Uses PyTorch's AliasDb, so writes through views count as writes to the
// viewed value.
MutationInfo AnalyzeMutation(const CanonicalGraph& canonical);

}  // namespace mp
