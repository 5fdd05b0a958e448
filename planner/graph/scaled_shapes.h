// FillShapes for a large batch without running it: probe the graph at batch
// 1 and 2, and scale every dimension that doubled to the full batch. Shapes
// are affine in the batch for the models pipelines are built for (the
// profiler's byte fit assumes the same); anything else falls back to one
// pass at the full batch, so the result always equals FillShapes's.
#pragma once

#include <vector>

#include "planner/graph/canonical_graph.h"
#include "planner/graph/input_spec.h"
#include "planner/graph/op_graph.h"

namespace mp {

// Fills `graph` with the dtype, shape and bytes of every tensor value at the
// batch of `inputs` (a full-batch spec). Errors as FillShapes.
void FillShapesForBatch(const CanonicalGraph& canonical, const std::vector<TensorSpec>& inputs, OpGraph& graph);

}  // namespace mp
