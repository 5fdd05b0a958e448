// StageLayout: where a plan's values live, computed once per LoadedPlan and
// read by every step. Parameters are never sent: each stage passes the
// ones it reads, and in training a parameter read by several stages (tied
// weights) is the real tensor in its first stage and a detached alias
// (sharing its storage) in the others, whose gradients join the real one's
// after the step (gradient_sync.h). Boundaries carry what a later stage
// reads, in graph order: a value needed two stages on is relayed, as the
// plan's neighbour-only SEND/RECV actions require.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <set>
#include <utility>
#include <vector>

#include "planner/graph/canonical_graph.h"
#include "planner/graph/cut.h"

namespace mp {

struct StageLayout {
  std::vector<BoundaryValue> model_inputs;         // the graph's model inputs
  std::map<BoundaryValue, size_t> param_index;     // a parameter's graph input -> canonical.params index
  std::vector<std::map<BoundaryValue, at::Tensor>> stage_params;  // per stage: the tensor it passes for each
  std::vector<std::pair<size_t, at::Tensor>> aliases;  // (param, alias) of tied parameters, in training
  std::vector<int> first_user;                     // per parameter: the first of them; -1: none
  std::vector<BoundaryValue> output_keys;          // the model's outputs, their final versions
  std::vector<int> output_stage;                   // per output: the stage that makes it; -1: none does (an input)
  std::vector<std::set<BoundaryValue>> needed_after;  // per stage: what any later stage reads
  std::vector<std::vector<BoundaryValue>> boundary;   // s -> s + 1: the keys a message carries, in graph order
};

StageLayout BuildStageLayout(const CanonicalGraph& canonical, const std::vector<StageGraph>& stages, bool training);

}  // namespace mp
