// The module path a node of an inlined graph came from.
#pragma once

#include <torch/script.h>

#include <map>
#include <set>
#include <string>
#include <tuple>

namespace mp {

// Inline names a call to a module by the last attribute of the chain that
// reached it: `for blk in self.blocks: x = blk(x)` (the loop unrolled to
// self.blocks[0], [1], ...) gives "0", "1", and `blk.norm(x)` "norm". The
// chains are in the methods' graphs before inlining: CallSitePaths keeps,
// for each call site whose module is two or more attributes away from
// self, the whole chain ("blocks.0", "blocks.0.norm"), keyed by the call's
// source range and that last name.
class CallSitePaths {
 public:
  CallSitePaths() = default;
  // The call sites in every method of `module` and of the modules under it.
  explicit CallSitePaths(const torch::jit::Module& module);

  // The chain called at `range` whose last attribute is `name`; `name`
  // where no chain was recorded (or two were, differently).
  std::string Path(const torch::jit::SourceRange& range, const std::string& name) const;

 private:
  using Key = std::tuple<const void*, size_t, size_t, std::string>;  // source, start, end, last name
  static Key KeyOf(const torch::jit::SourceRange& range, const std::string& name);
  // Adds the call sites of `block` (a method's graph, `self` its input 0).
  void Collect(const torch::jit::Block* block, const torch::jit::Value* self, std::set<Key>& ambiguous);

  std::map<Key, std::string> paths_;
};

// "layer2.3.conv1" for a node inlined from self.layer2[3].conv1's forward,
// "blocks.0.norm" for one inlined from `blk.norm(x)` in a loop over
// self.blocks (with `call_sites` of the model), "" for a node written in
// the root module's own forward. Read from the node's inlined call stack;
// falls back to the tracer's scope.
std::string LayerName(torch::jit::Node* node, const CallSitePaths& call_sites = CallSitePaths());

}  // namespace mp
