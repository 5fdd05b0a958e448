// The module path a node of an inlined graph came from.
#pragma once

#include <torch/script.h>

#include <string>

namespace mp {

// "layer2.3.conv1" for a node inlined from self.layer2[3].conv1's forward,
// "" for a node written in the root module's own forward. Read from the
// node's inlined call stack; falls back to the tracer's scope.
std::string LayerName(torch::jit::Node* node);

}  // namespace mp
