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

#include <cctype>
#include <cstdint>
#include <cstdio>

namespace mp {
namespace {

// The printed IR without aten::warn's attribute: "aten::warn[warn_id=7](%a)"
// becomes "aten::warn(%a)". Done on the text, not on a copy of the graph:
// Graph::copy renames values, and every fingerprint made before (every
// graph without a warning) must stay what it was.
std::string WithoutWarnIds(std::string text) {
  static const std::string kKey = "[warn_id=";
  for (size_t at = text.find(kKey); at != std::string::npos; at = text.find(kKey, at)) {
    size_t end = at + kKey.size();
    while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
    if (end < text.size() && text[end] == ']') {
      text.erase(at, end + 1 - at);
    } else {
      at = end;  // another attribute follows: not the form aten::warn prints
    }
  }
  return text;
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
  return Fnv1a64Hex(WithoutWarnIds(graph.toString(/*print_source_locations=*/false)));
}

}  // namespace mp
