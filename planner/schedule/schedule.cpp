// Schedule generation, after GPipe (Huang et al., NeurIPS 2019: fill-drain)
// and PipeDream-flush / 1F1B (Narayanan et al., "Memory-Efficient Pipeline-
// Parallel DNN Training", ICML 2021), in torch.distributed.pipelining's
// action grammar. With F and B one slot each, K = 3 stages, M = 4:
//
//   gpipe    slot  0  1  2  3  4  5  6  7  8  9 10 11
//            s0   F0 F1 F2 F3  .  .  .  . B0 B1 B2 B3
//            s1    . F0 F1 F2 F3  .  . B0 B1 B2 B3  .
//            s2    .  . F0 F1 F2 F3 B0 B1 B2 B3  .  .
//
//   1f1b     slot  0  1  2  3  4  5  6  7  8  9 10 11
//            s0   F0 F1 F2  .  . B0 F3 B1  . B2  . B3
//            s1    . F0 F1  . B0 F2 B1 F3 B2  . B3  .
//            s2    .  . F0 B0 F1 B1 F2 B2 F3 B3  .  .
//
//   forward  slot  0  1  2  3  4  5
//            s0   F0 F1 F2 F3  .  .
//            s1    . F0 F1 F2 F3  .
//            s2    .  . F0 F1 F2 F3
//
// Both training schedules take 2(M + K - 1) slots; 1f1b holds at most K - s
// micro-batches' activations on stage s where gpipe holds M. Stage s of 1f1b
// runs K - s - 1 warm-up forwards, then alternates F and B, then cools down.
// (The simulator tests replay exactly these drawings.)
#include "planner/schedule/schedule.h"

#include <algorithm>

#include "common/error.h"

namespace mp {
namespace {

std::vector<Action> ComputeOrder(ScheduleKind kind, int stages, int microbatches, int s) {
  std::vector<Action> order;
  auto f = [&](int m) { order.push_back({s, ActionKind::kForward, m}); };
  auto b = [&](int m) { order.push_back({s, ActionKind::kBackward, m}); };
  switch (kind) {
    case ScheduleKind::kForwardOnly:
      for (int m = 0; m < microbatches; ++m) f(m);
      break;
    case ScheduleKind::kGPipe:
      for (int m = 0; m < microbatches; ++m) f(m);
      for (int m = 0; m < microbatches; ++m) b(m);
      break;
    case ScheduleKind::kOneFOneB: {
      const int warmup = std::min(stages - s - 1, microbatches);
      for (int m = 0; m < warmup; ++m) f(m);
      for (int m = warmup; m < microbatches; ++m) {
        f(m);
        b(m - warmup);
      }
      for (int m = microbatches - warmup; m < microbatches; ++m) b(m);
      break;
    }
  }
  return order;
}

}  // namespace

std::string ScheduleName(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kGPipe: return "gpipe";
    case ScheduleKind::kOneFOneB: return "1f1b";
    case ScheduleKind::kForwardOnly: return "forward";
  }
  throw InternalError("ScheduleName: unknown ScheduleKind");
}

ScheduleKind ParseScheduleKind(const std::string& text) {
  if (text == "gpipe") return ScheduleKind::kGPipe;
  if (text == "1f1b") return ScheduleKind::kOneFOneB;
  if (text == "forward" || text == "forward_only" || text == "infer") return ScheduleKind::kForwardOnly;
  throw InputError(Concat("schedule '", text, "': expected gpipe, 1f1b or forward"));
}

bool IsTraining(ScheduleKind kind) { return kind != ScheduleKind::kForwardOnly; }

Schedule BuildSchedule(ScheduleKind kind, int stages, int microbatches) {
  if (stages < 1) throw InputError(Concat("schedule: ", stages, " stages; expected at least 1"));
  if (microbatches < 1) {
    throw InputError(Concat("schedule: ", microbatches, " micro-batches; expected at least 1"));
  }
  Schedule schedule{kind, stages, microbatches, {}};
  schedule.actions.resize(stages);
  for (int s = 0; s < stages; ++s) {
    auto& list = schedule.actions[s];
    for (const Action& a : ComputeOrder(kind, stages, microbatches, s)) {
      const bool forward = a.kind == ActionKind::kForward;
      const bool receives = forward ? s > 0 : s < stages - 1;
      const bool sends = forward ? s < stages - 1 : s > 0;
      if (receives) list.push_back({s, forward ? ActionKind::kRecvF : ActionKind::kRecvB, a.microbatch});
      list.push_back(a);
      if (sends) list.push_back({s, forward ? ActionKind::kSendF : ActionKind::kSendB, a.microbatch});
    }
  }
  return schedule;
}

std::vector<Action> ComputeActions(const std::vector<Action>& stage_actions) {
  std::vector<Action> out;
  for (const Action& a : stage_actions) {
    if (IsCompute(a.kind)) out.push_back(a);
  }
  return out;
}

int MicrobatchesInFlight(ScheduleKind kind, int stages, int microbatches, int stage) {
  switch (kind) {
    case ScheduleKind::kGPipe: return microbatches;
    case ScheduleKind::kOneFOneB: return std::min(stages - stage, microbatches);
    case ScheduleKind::kForwardOnly: return 1;
  }
  throw InternalError("MicrobatchesInFlight: unknown ScheduleKind");
}

}  // namespace mp
