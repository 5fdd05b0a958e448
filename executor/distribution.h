// mpexec's stages over several processes: which rank runs which stage, and
// what rank 0 gathers from the others after the steps so that it can
// report, verify and save as a single process would.
#pragma once

#include <vector>

#include "executor/loaded_plan.h"
#include "executor/pipeline.h"
#include "executor/process_group.h"

namespace mp {

// Contiguous blocks of stages per rank, in order: `world` ranks for
// `stages` stages. Throws InputError when there are more ranks than stages.
std::vector<int> StageOwners(int stages, int world);

// Rank 0: `runs` become whole-pipeline figures: each step starts when the
// first rank started it and ends when the last finished, stages' busy
// times and events come from their ranks (events moved onto rank 0's
// clock), losses add up and the peak heap is the largest. The other ranks
// send theirs and keep their own. Every rank calls it with the same steps.
void GatherRuns(ProcessGroup& group, const Distribution& dist, std::vector<PipelineRun>& runs);

// Rank 0: every parameter and buffer gets the value of the rank that ran
// the first stage reading it (the others' copies are stale after training).
void GatherState(ProcessGroup& group, const Distribution& dist, const LoadedPlan& loaded);

}  // namespace mp
