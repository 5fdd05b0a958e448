// The contention probe's copies as processes (copies.h), as mpexec's
// data-parallel replicas run, one process per device: one child process
// per copy, forked here (forked_child.h) and kept for the copies' life. A
// child builds its copy of the graph there (this process's memory does
// not grow), then waits for its next run; the copies of a run meet on a
// CopySync in memory the children share, and each child hands its sample
// back there. With MP_PIN_CPUS=1 child w runs on CPU worker w's cores.
#pragma once

#include <torch/script.h>

#include <memory>
#include <vector>

#include "planner/graph/canonical_graph.h"
#include "planner/profile/copies.h"
#include "planner/profile/pass_options.h"

namespace mp {

// One copy per entry of `inputs` (each copy's model inputs), each run with
// `threads` intra-op threads. A copy that cannot be built fails its first
// run: Run throws Error naming the copy and the failure's first line.
std::unique_ptr<Copies> CopiesInProcesses(const CanonicalGraph& canonical,
                                          const std::vector<std::vector<c10::IValue>>& inputs,
                                          const PassOptions& options, int threads);

}  // namespace mp
