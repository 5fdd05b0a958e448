// Cutting the canonical graph into pipeline stages.
#pragma once

#include <torch/script.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "planner/graph/canonical_graph.h"

namespace mp {

// A value of the canonical graph as it is between two in-place writes:
// version 0 is what its producer made, version k what the k-th writer left.
struct BoundaryValue {
  const torch::jit::Value* value = nullptr;
  int version = 0;
  bool operator<(const BoundaryValue& o) const {
    return std::tie(value, version) < std::tie(o.value, o.version);
  }
  bool operator==(const BoundaryValue& o) const {
    return value == o.value && version == o.version;
  }
};

struct StageGraph {
  int index = 0;
  std::vector<int> nodes;                    // canonical ids, ascending
  std::shared_ptr<torch::jit::Graph> graph;  // a standalone graph
  std::vector<BoundaryValue> inputs;         // graph->inputs(), one to one: model
                                             // inputs, parameters, received values
  std::vector<BoundaryValue> outputs;        // graph->outputs(), one to one
};

// Cuts `canonical` into stages: node id i goes to stage stage_of_node[i].
// Each stage graph reads the parameters it uses and the values other
// stages produce, and returns the values later stages or the model's
// outputs need; constants and lists of them are cloned, never sent.
//
// In-place writes never leak across a cut: a stage that writes a value it
// received works on a clone, and a stage that writes a value another stage
// still needs in its earlier state sends a snapshot taken before the write.
//
// Throws PlanError for an invalid cut: a node not assigned or out of range,
// an empty stage, a stage reading from a later stage, or a write through a
// view whose base lives in another stage.
std::vector<StageGraph> CutStages(const CanonicalGraph& canonical,
                                  const std::vector<int>& stage_of_node);

// Runs the stages one after another on the model inputs and returns the
// model's outputs: what a pipeline computes for one micro-batch.
std::vector<c10::IValue> RunStages(const CanonicalGraph& canonical,
                                   const std::vector<StageGraph>& stages,
                                   const std::vector<c10::IValue>& model_inputs);

}  // namespace mp
