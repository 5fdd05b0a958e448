// Inference outputs: each micro-batch's model outputs come from whichever
// stage made them (StepResults::made) and are joined in micro-batch order.
// Under a Distribution the first rank of each replica joins its replica's
// (the others send what their stages made), then rank 0 joins the
// replicas'. Only rank 0 ends up with the outputs.
#pragma once

#include <ATen/core/ivalue.h>

#include <map>
#include <vector>

#include "executor/loaded_plan.h"
#include "executor/pipeline.h"

namespace mp {

// The whole batch's outputs on rank 0 (and in one process); empty on the
// other ranks. `made` is [stage][micro-batch] -> output index -> value.
std::vector<c10::IValue> GatherOutputs(const LoadedPlan& loaded, const Distribution* dist,
                                       std::vector<std::vector<std::map<size_t, c10::IValue>>> made);

}  // namespace mp
