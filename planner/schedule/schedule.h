// Pipeline schedules: for K stages and M micro-batches, each stage's ordered
// list of actions (compute and transfers), the same lists the simulator times
// and the executor runs. Kinds: gpipe (fill-drain), 1f1b (PipeDream-flush)
// and forward (inference). ValidateSchedule proves a list set can run.
#pragma once

#include <string>
#include <vector>

#include "planner/schedule/action.h"

namespace mp {

enum class ScheduleKind { kGPipe, kOneFOneB, kForwardOnly };

// "gpipe", "1f1b", "forward"; ParseScheduleKind also accepts "forward_only"
// and "infer", and throws InputError naming the text otherwise.
std::string ScheduleName(ScheduleKind kind);
ScheduleKind ParseScheduleKind(const std::string& text);

bool IsTraining(ScheduleKind kind);  // gpipe and 1f1b run backwards

struct Schedule {
  ScheduleKind kind = ScheduleKind::kGPipe;
  int stages = 1;
  int microbatches = 1;
  std::vector<std::vector<Action>> actions;  // [stage] -> ordered actions
};

// Builds the per-stage lists with transfers inserted: a RECV right before the
// compute that needs it, a SEND right after the compute that made it.
// Throws InputError for stages < 1 or microbatches < 1.
Schedule BuildSchedule(ScheduleKind kind, int stages, int microbatches);

// The compute actions of one stage only (F/B), in schedule order.
std::vector<Action> ComputeActions(const std::vector<Action>& stage_actions);

// The most micro-batches whose activations a stage holds at once: M for
// gpipe, min(K - stage, M) for 1f1b, 1 for forward.
int MicrobatchesInFlight(ScheduleKind kind, int stages, int microbatches, int stage);

// Throws InputError naming the first problem: an action on the wrong stage, a
// micro-batch out of range, a missing or repeated F/B, a B before its F, a
// compute before the RECV it needs, a SEND before the compute that makes its
// tensor, a SEND without the matching RECV on the peer stage (or vice
// versa), or a deadlock: some stage waits on a RECV whose SEND can never run
// (sends are asynchronous, receives block, as in batch_isend_irecv).
void ValidateSchedule(const Schedule& schedule);

}  // namespace mp
