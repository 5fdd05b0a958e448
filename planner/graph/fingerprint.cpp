// Graph fingerprint: FNV-1a over the printed IR. The printer is
// deterministic for a given graph (value names come from the source, not
// from addresses), so the hash is too; mpexec compares it with the plan's to
// prove it cut the graph the planner measured.
#include "planner/graph/fingerprint.h"

#include <cstdint>
#include <cstdio>

namespace mp {

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
  return Fnv1a64Hex(graph.toString(/*print_source_locations=*/false));
}

}  // namespace mp
