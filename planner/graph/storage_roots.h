// Which storages a value may share, read off the graph's structure where
// the structure tells: a view or an in-place result (an output whose
// schema alias set is an argument's) shares its argument's storages; a list
// holds its elements' storages, a dict the values set into it so far
// (DictConstruct, _set_item), and what comes out of either (ListUnpack,
// __getitem__) holds the same; anything else a schema op returns is fresh.
// A write to a list or dict itself (append, _set_item) writes no tensor.
// The same holds inside an if's or a loop's blocks, whose writes are
// those of the nodes in them (torch.nn.utils.rnn.pack_padded_sequence
// scatters into a fresh tensor inside an if; AliasDb let that write every
// weight, and an LSTM tagger over padded batches was planned on one stage).
// Where the structure does not tell (what an if or a loop returns, a loop
// variable, a tuple, a node without a schema, a dict written another way),
// nothing is claimed and the caller keeps AliasDb's answer.
//
// Why: AliasDb puts every tensor that enters a list passed to an op without
// alias annotations (torch.cat's) into one wildcard set, and a write to any
// of them counts as a write to all. In torchvision's ShuffleNetV2 the
// relu_ inside one branch then "writes" the other half of the channel
// split, both being torch.cat's inputs, and the cutter found that half
// stale and refused every cut, one stage included. A tensor that goes into
// a dict joins the same set, with every graph input: in torchvision's
// LR-ASPP, whose IntermediateLayerGetter puts backbone outputs in an
// OrderedDict, a hardswish_ "wrote" every weight and BatchNorm's
// num_batches_tracked.add_ the features taken out of the dict.
#pragma once

#include <torch/script.h>

#include <optional>
#include <set>
#include <unordered_map>

namespace mp {

class StorageRoots {
 public:
  // Walks the top-level nodes of `graph` in order.
  explicit StorageRoots(const torch::jit::Graph& graph);

  // True when the structure shows that no argument `node` (or a node in
  // its blocks) writes can share storage with `value`; false where it may,
  // or where it cannot tell. `node` is any node of the graph.
  bool WritesMiss(const torch::jit::Node* node, const torch::jit::Value* value) const;

 private:
  using Roots = std::optional<std::set<const torch::jit::Value*>>;  // nullopt: cannot tell
  void Walk(const torch::jit::Block& block);
  Roots Of(const torch::jit::Value* value) const;
  std::unordered_map<const torch::jit::Value*, Roots> roots_;
  std::set<const torch::jit::Value*> set_dicts_, written_;  // ContainerWrites
};

}  // namespace mp
