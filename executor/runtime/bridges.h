// Bridges: the c10d transport between stages on different ranks. For each
// boundary whose two stages this rank splits with another, a thread stands
// in for the far side of the local channel: it sends what the local worker
// queues as a WireMessage (values in the boundary's key order, which every
// process derives alike from the graph) or receives the peer's and queues
// it, so workers run the same code as in one process. A failure is
// recorded for the local stage, which stops the step (failure.h).
#pragma once

#include <functional>
#include <vector>

#include "executor/pipeline.h"
#include "executor/runtime/failure.h"
#include "executor/runtime/links.h"

namespace mp {

// The jobs that carry this rank's cross-rank boundaries for one step of
// `microbatches` micro-batches (forward only in inference).
std::vector<std::function<void()>> BridgeJobs(Links& links, const Distribution& dist,
                                              const std::vector<std::vector<BoundaryValue>>& boundary,
                                              int microbatches, bool training, Failure& failure);

}  // namespace mp
