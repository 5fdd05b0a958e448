// Synthetic graphs and profiles for the partitioner tests: an OpGraph and a
// matching Profile built node by node, with times and bytes chosen by the
// test instead of measured. Plain structs, no LibTorch.
#pragma once

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "planner/graph/op_graph.h"
#include "planner/profile/profile.h"

namespace mp::testing {

class GraphBuilder {
 public:
  // Times given to Node are those at the largest size; smaller sizes scale
  // them by m / largest (so the per-sample cost is flat).
  explicit GraphBuilder(std::vector<int64_t> sizes = {8}, bool training = true) {
    profile.microbatch_sizes = std::move(sizes);
    profile.batch = profile.microbatch_sizes.back();
    profile.training = training;
  }

  // A model input; returns its value id.
  int Input(int64_t bytes_per_sample, const std::string& dtype = "float32") {
    const int v = AddValue(-1, bytes_per_sample, 0, dtype);
    graph.inputs.push_back(v);
    return v;
  }

  // A node reading `inputs` (value ids); returns its output value id.
  int Node(const std::string& layer, const std::vector<int>& inputs, double forward_ms, double backward_ms,
           int64_t out_bytes_per_sample, int64_t param_bytes = 0, bool mutates = false,
           const std::string& dtype = "float32") {
    const int id = int(graph.nodes.size());
    OpNode node;
    node.id = id;
    node.kind = "aten::op";
    node.layer = layer;
    node.inputs = inputs;
    node.mutates = mutates;
    if (param_bytes > 0) {
      const int p = AddValue(-1, 0, param_bytes, "float32");
      graph.values[p].is_param = true;
      graph.params.push_back(p);
      node.inputs.push_back(p);
    }
    for (int v : node.inputs) graph.values[v].consumers.push_back(id);
    graph.nodes.push_back(node);
    NodeCost cost;
    cost.id = id;
    cost.layer = layer;
    for (int64_t m : profile.microbatch_sizes) {
      const double scale = double(m) / double(profile.microbatch_sizes.back());
      cost.forward_ms.push_back(forward_ms * scale);
      cost.backward_ms.push_back(profile.training ? backward_ms * scale : 0);
    }
    cost.output_bytes_per_sample = out_bytes_per_sample;
    cost.param_bytes = param_bytes;
    profile.nodes.push_back(cost);
    const int out = AddValue(id, out_bytes_per_sample, 0, dtype);
    graph.nodes.back().outputs.push_back(out);
    return out;
  }

  // A prim::Constant node: free, and its value is cloned, never sent.
  int Constant(const std::string& layer = "") {
    const int v = Node(layer, {}, 0, 0, 0);
    graph.nodes.back().kind = "prim::Constant";
    graph.values[v].rematerializable = true;
    return v;
  }

  void Output(int value) {
    graph.values[value].is_graph_output = true;
    graph.outputs.push_back(value);
  }

  OpGraph graph;
  Profile profile;

 private:
  int AddValue(int producer, int64_t per_sample, int64_t fixed, const std::string& dtype) {
    OpValue v;
    v.id = int(graph.values.size());
    v.name = "v" + std::to_string(v.id);
    v.type = "Tensor";
    v.dtype = dtype;
    v.producer = producer;
    graph.values.push_back(v);
    profile.values.push_back({per_sample, fixed});
    return v.id;
  }
};

// A chain of n nodes: each reads the previous output.
inline GraphBuilder Chain(const std::vector<double>& forward_ms, int64_t bytes_per_sample, int64_t param_bytes = 0,
                          std::vector<int64_t> sizes = {8}) {
  GraphBuilder b(std::move(sizes));
  int v = b.Input(bytes_per_sample);
  for (size_t i = 0; i < forward_ms.size(); ++i) {
    v = b.Node("layer" + std::to_string(i), {v}, forward_ms[i], 2 * forward_ms[i], bytes_per_sample, param_bytes);
  }
  b.Output(v);
  return b;
}

// A random DAG of n nodes: each reads one to three earlier values (the
// previous node's output always, so it is connected), with random times,
// activation and parameter bytes. All nodes cost time.
inline GraphBuilder RandomDag(std::mt19937& rng, int n, std::vector<int64_t> sizes = {8}) {
  GraphBuilder b(std::move(sizes));
  std::uniform_real_distribution<double> ms(0.1, 10.0);
  std::uniform_int_distribution<int64_t> bytes(1, 4000), params(0, 100000);
  std::vector<int> outs = {b.Input(bytes(rng))};
  for (int i = 0; i < n; ++i) {
    std::vector<int> inputs = {outs.back()};
    const int extra = std::uniform_int_distribution<int>(0, 2)(rng);
    for (int k = 0; k < extra; ++k) {
      const int v = outs[std::uniform_int_distribution<size_t>(0, outs.size() - 1)(rng)];
      if (std::find(inputs.begin(), inputs.end(), v) == inputs.end()) inputs.push_back(v);
    }
    std::sort(inputs.begin(), inputs.end());
    outs.push_back(b.Node("n" + std::to_string(i), inputs, ms(rng), ms(rng), bytes(rng), params(rng)));
  }
  b.Output(outs.back());
  return b;
}

}  // namespace mp::testing
