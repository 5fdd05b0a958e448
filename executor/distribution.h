// mpexec's stages over several processes: which rank runs which stage, and
// what rank 0 gathers from the others after the steps so that it can
// report, verify and save as a single process would.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "executor/loaded_plan.h"
#include "executor/pipeline.h"
#include "executor/process_group.h"

namespace mp {

// Where `rank` of `world` stands for a plan whose stage s runs in program
// stage_program[s] (one per device) with `replicas` replicas: its replica,
// and each stage's rank in that replica (contiguous blocks of programs per
// rank, in order, so a device's stages stay together). Throws InputError
// when the ranks do not divide into the replicas or a replica gets more
// ranks than programs, opening with `world_given` (what set the count:
// "WORLD_SIZE=3", or "--launch-local 3"). The groups are left to the caller
// and MakeStageGroups.
Distribution Distribute(const std::vector<int>& stage_program, int replicas, int rank, int world,
                        const std::string& world_given);

// With replicas: one process group per stage of this rank, over that
// stage's ranks in every replica (made in stage order, so every member
// makes it at the same point). Fills dist.stage_groups; the result owns them.
std::vector<std::unique_ptr<ProcessGroup>> MakeStageGroups(Distribution& dist);

// Rank 0: `runs` become whole-pipeline figures: each step starts when the
// first rank started it and ends when the last finished, stages' busy
// times, all-reduce times and events come from their ranks in replica 0
// (events moved onto rank 0's clock), losses add up over every replica and
// the peak heap is the largest. The other ranks
// send theirs and keep their own. Every rank calls it with the same steps.
void GatherRuns(ProcessGroup& group, const Distribution& dist, std::vector<PipelineRun>& runs);

// Rank 0: every parameter and buffer gets the value of the rank that ran
// the first stage reading it in replica 0 (the others' copies are stale
// after training; replicas hold the same parameters, and replica 0's
// BatchNorm statistics are kept, as DDP's broadcast of rank 0's buffers).
// With `optimizer`, its state for each parameter comes along from that rank
// too (--save-optimizer); with `gradients` (one per parameter, this rank's
// copies), theirs (--verify's first step).
void GatherState(ProcessGroup& group, const Distribution& dist, const LoadedPlan& loaded,
                 Optimizer* optimizer = nullptr, std::vector<at::Tensor>* gradients = nullptr);

}  // namespace mp
