// InspectModel: the canonical-graph summary behind `mpplan --inspect`.
// Load -> Canonicalize -> BuildOpGraph -> FillShapes on the input spec,
// then group nodes by top-level module for the layer table.
#include "planner/inspect/inspect.h"

#include <chrono>

#include "common/error.h"
#include "planner/graph/build_op_graph.h"
#include "planner/graph/canonical_graph.h"
#include "planner/graph/model_file.h"
#include "planner/graph/resolve_inputs.h"
#include "planner/graph/run_graph.h"
#include "planner/profile/timer.h"

namespace mp {
namespace {

std::string TopLayer(const std::string& path) {
  return path.empty() ? "(root)" : path.substr(0, path.find('.'));
}

}  // namespace

GraphSummary InspectModel(const std::string& model_path, const std::vector<std::string>& input_flags) {
  GraphSummary summary;
  summary.model = model_path;
  auto start = std::chrono::steady_clock::now();
  ModelFile model = LoadModelFile(model_path);
  summary.load_ms = MsSince(start);
  start = std::chrono::steady_clock::now();
  CanonicalOptions options;
  options.given = InputsGiven(model, input_flags);
  CanonicalGraph canonical = Canonicalize(model.module, options);
  summary.canonicalize_ms = MsSince(start);

  summary.inputs = ResolveInputs(model, canonical, input_flags);
  summary.input_source = input_flags.empty() ? "embedded" : "--input";
  OpGraph graph = BuildOpGraph(canonical);
  FillShapes(canonical, SyntheticInputs(summary.inputs), graph);

  summary.fingerprint = canonical.fingerprint;
  summary.nodes = static_cast<int>(graph.nodes.size());
  for (const torch::jit::Value* out : canonical.graph->outputs()) {
    summary.outputs.push_back(out->type()->annotation_str());
  }
  std::map<std::string, size_t> layer_index;
  auto layer_of = [&](const std::string& name, int node) -> LayerSummary& {
    auto [it, added] = layer_index.emplace(name, summary.layers.size());
    if (added) {
      summary.layers.push_back({});
      summary.layers.back().name = name;
      summary.layers.back().first = node;
    }
    return summary.layers[it->second];
  };
  for (const auto& node : graph.nodes) {
    ++summary.kinds[node.kind];
    // Constants are pooled at the top of the graph and cloned into every
    // stage that reads them; they belong to no layer.
    const bool constant = node.kind == "prim::Constant";
    LayerSummary& layer = layer_of(constant ? "(root)" : TopLayer(node.layer), node.id);
    ++layer.nodes;
    layer.last = node.id;
    for (int v : node.outputs) {
      const auto& value = graph.values[v];
      summary.activation_bytes += value.bytes;
      bool read_outside = value.is_graph_output;
      for (int c : value.consumers) read_outside |= TopLayer(graph.nodes[c].layer) != layer.name;
      if (read_outside) layer.out_bytes += value.bytes;
    }
  }
  for (int v : graph.params) {
    const auto& value = graph.values[v];
    const int64_t elements = value.bytes / std::max<int64_t>(1, DtypeBytes(value.dtype));
    ++summary.params;
    summary.param_elements += elements;
    summary.param_bytes += value.bytes;
    const size_t dot = value.name.rfind('.');
    LayerSummary& layer = layer_of(TopLayer(dot == std::string::npos ? "" : value.name.substr(0, dot)),
                                   value.consumers.empty() ? 0 : value.consumers.front());
    ++layer.params;
    layer.param_elements += elements;
    layer.param_bytes += value.bytes;
  }
  return summary;
}

}  // namespace mp
