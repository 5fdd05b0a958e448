// A stable identity for a canonical graph.
#pragma once

#include <torch/script.h>

#include <string>

namespace mp {

// 16 hex digits of FNV-1a-64 over the graph's IR as printed without source
// locations and without aten::warn's warn_id (a counter of the process, not
// of the graph). The same file canonicalised in any process, whatever it
// loaded before, gives the same string; a change to any op, shape
// annotation or input name changes it.
std::string Fingerprint(const torch::jit::Graph& graph);

// The hash itself, for other stable identities.
std::string Fnv1a64Hex(const std::string& text);

}  // namespace mp
