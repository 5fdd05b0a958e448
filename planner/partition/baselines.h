// Baseline partitioners behind the same interface as the DP: each returns
// stage bounds over a pipeline order, which MakePartition turns into a
// Partition. They ignore what the DP weighs (communication, memory, device
// speed), which is what makes them baselines.
#pragma once

#include <string>
#include <vector>

#include "planner/graph/op_graph.h"
#include "planner/partition/partition_dp.h"
#include "planner/partition/stage_cost.h"

namespace mp {

// `uniform`: an equal number of nodes that cost time per stage (DeepSpeed's
// partition_method="uniform"); free nodes stay with the node before them.
std::vector<int> UniformBounds(const StageCostModel& model);

// `params`: the min-max split of parameter bytes (DeepSpeed's default,
// partition_method="parameters").
std::vector<int> ParamBounds(const StageCostModel& model);
// Its table for every stage count up to `stages` (ParamBounds for K is
// its Solve(K)), which a search shares among its K.
MinMaxTable ParamTable(const StageCostModel& model, int stages);

// `block`: balances compute time the way torchgpipe's balance_by_time does,
// by leveling block sums (after Barany and Grinberg's block partitions).
std::vector<int> BlockBounds(const StageCostModel& model);

// A named-layer split, "layer1,layer2 | layer3,layer4,fc": groups of layer
// names separated by '|'. Throws InputError for an empty group or name.
std::vector<std::vector<std::string>> ParseLayerSplit(const std::string& text);

// Stage bounds for a layer split over `order`. A name matches a node whose
// OpNode::layer is the name or starts with it followed by '.'; the longest
// matching name wins. Nodes no name matches (the root module, layer "", or
// layers left out) go with the stage before them in order (the first stage
// at the front), and so do constants, which every stage that reads one
// clones wherever it sits in order. Throws InputError naming the layer for a name that matches
// no node, a name in two groups, or groups not contiguous in order.
std::vector<int> LayerSplitBounds(const OpGraph& graph, const std::vector<int>& order,
                                  const std::vector<std::vector<std::string>>& groups);

}  // namespace mp
