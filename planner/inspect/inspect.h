// `mpplan MODEL --inspect`: what the canonical graph of a model looks like.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "planner/graph/input_spec.h"

namespace mp {

struct LayerSummary {
  std::string name;        // top-level module (conv1, layer3); "(root)" for forward's own ops
  int nodes = 0;
  int first = 0, last = 0; // canonical id range the layer's nodes span
  int params = 0;          // parameter and buffer tensors
  int64_t param_elements = 0;
  int64_t param_bytes = 0;
  int64_t out_bytes = 0;   // bytes of values it produces that later layers read
};

struct GraphSummary {
  std::string model;
  std::string fingerprint;
  std::vector<TensorSpec> inputs;
  std::string input_source;               // "embedded" or "--input"
  std::vector<std::string> outputs;       // output types
  int nodes = 0;
  int params = 0;                         // lifted tensors (parameters and buffers)
  int64_t param_elements = 0;
  int64_t param_bytes = 0;
  int64_t activation_bytes = 0;           // all tensor values of one forward
  std::map<std::string, int> kinds;       // node count by kind
  std::vector<LayerSummary> layers;       // in order of first node
  double load_ms = 0;
  double canonicalize_ms = 0;
};

// Loads, canonicalises and shape-probes the model at `model_path` on its
// embedded input spec, or on `input_flags` (`float32[4,3,64,64]`, one per
// model input) when given. Throws InputError for any bad file or flag.
GraphSummary InspectModel(const std::string& model_path,
                          const std::vector<std::string>& input_flags);

std::string FormatSummary(const GraphSummary& summary);
nlohmann::json SummaryToJson(const GraphSummary& summary);

}  // namespace mp
