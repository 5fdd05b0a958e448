// Graph fingerprint: FNV-1a over the printed IR. The printer is
// deterministic for a given graph (value names come from the source, not
// from addresses), so the hash is too; mpexec compares it with the plan's to
// prove it cut the graph the planner measured. One attribute is not the
// graph's own and is left out: aten::warn's warn_id, a counter of the
// process that the TorchScript compiler hands each warning it meets (the
// interpreter warns once per id). nn.Transformer's multi-head attention
// warns, and its canonical graph printed warn_id=1 in a fresh process and
// 7 or 9 in one that had loaded other models first (the tests, bench_exec,
// a program with two mp::Executors), so the plan made in one read as made
// for another graph in the next.
#include "planner/graph/fingerprint.h"

#include <cstdint>
#include <cstdio>
#include <memory>

namespace mp {
namespace {

void DropWarnIds(torch::jit::Block* block) {
  for (torch::jit::Node* node : block->nodes()) {
    if (node->hasAttribute(torch::jit::attr::warn_id)) node->removeAttribute(torch::jit::attr::warn_id);
    for (torch::jit::Block* inner : node->blocks()) DropWarnIds(inner);
  }
}

}  // namespace

std::string Fnv1a64Hex(const std::string& text) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(hash));
  return out;
}

std::string Fingerprint(const torch::jit::Graph& graph) {
  // Graph::copy does not change the graph; LibTorch does not mark it const.
  const std::shared_ptr<torch::jit::Graph> copy = const_cast<torch::jit::Graph&>(graph).copy();
  DropWarnIds(copy->block());
  return Fnv1a64Hex(copy->toString(/*print_source_locations=*/false));
}

}  // namespace mp
