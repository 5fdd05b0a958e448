// ValidateSchedule: proves that a set of per-stage action lists is one the
// executor can run. First each stage's list on its own (every F/B once, data
// received before it is used and produced before it is sent), then the pairs
// (each SEND has its RECV on the peer stage), then a replay with
// asynchronous sends and blocking receives that must reach every list's end.
#include <string>
#include <vector>

#include "common/error.h"
#include "planner/schedule/schedule.h"

namespace mp {
namespace {

constexpr int kKinds = 6;

// Flags per (kind, stage, micro-batch), for "seen on this stage" and "posted".
class ActionSet {
 public:
  ActionSet(int stages, int microbatches)
      : microbatches_(microbatches), seen_(size_t(kKinds) * stages * microbatches, false) {}
  bool Has(const Action& a) const { return seen_[Index(a)]; }
  void Add(const Action& a) { seen_[Index(a)] = true; }

 private:
  size_t Index(const Action& a) const {
    return (size_t(a.kind) * (seen_.size() / kKinds / microbatches_) + a.stage) * microbatches_ +
           a.microbatch;
  }
  int microbatches_;
  std::vector<bool> seen_;
};

std::string Where(int stage, const Action& a) {
  return Concat("schedule stage ", stage, ": ", FormatAction(a));
}

void CheckStageList(const Schedule& sch, int s, ActionSet& seen) {
  const bool training = IsTraining(sch.kind);
  const int last = sch.stages - 1;
  for (const Action& a : sch.actions[s]) {
    if (a.stage != s) throw InputError(Concat(Where(s, a), " names stage ", a.stage, "; expected ", s));
    if (a.microbatch < 0 || a.microbatch >= sch.microbatches) {
      throw InputError(Concat(Where(s, a), ": micro-batch ", a.microbatch, " out of range (",
                              sch.microbatches, " micro-batches)"));
    }
    if (!IsCompute(a.kind)) {
      const int peer = PeerStage(a);
      if (peer < 0 || peer > last) {
        throw InputError(Concat(Where(s, a), ": peer stage ", peer, " does not exist (", sch.stages,
                                " stages)"));
      }
    }
    if (seen.Has(a)) throw InputError(Concat(Where(s, a), " appears twice"));
    auto need = [&](ActionKind kind, const char* why) {
      if (!seen.Has({s, kind, a.microbatch})) {
        throw InputError(Concat(Where(s, a), " comes before ", FormatAction({s, kind, a.microbatch}),
                                " ", why));
      }
    };
    switch (a.kind) {
      case ActionKind::kForward:
        if (s > 0) need(ActionKind::kRecvF, "that receives its input");
        break;
      case ActionKind::kBackward:
        if (!training) throw InputError(Concat(Where(s, a), ": a backward in a forward-only schedule"));
        need(ActionKind::kForward, "whose activations it needs");
        if (s < last) need(ActionKind::kRecvB, "that receives its gradient");
        break;
      case ActionKind::kSendF: need(ActionKind::kForward, "that computes what it sends"); break;
      case ActionKind::kSendB: need(ActionKind::kBackward, "that computes what it sends"); break;
      default: break;
    }
    seen.Add(a);
  }
  for (int m = 0; m < sch.microbatches; ++m) {
    if (!seen.Has({s, ActionKind::kForward, m})) {
      throw InputError(Concat("schedule stage ", s, ": no ", FormatAction({s, ActionKind::kForward, m})));
    }
    if (training && !seen.Has({s, ActionKind::kBackward, m})) {
      throw InputError(Concat("schedule stage ", s, ": no ", FormatAction({s, ActionKind::kBackward, m})));
    }
  }
}

// Replays the lists: sends post at once, receives wait for their send.
void CheckNoDeadlock(const Schedule& sch) {
  ActionSet posted(sch.stages, sch.microbatches);
  std::vector<size_t> next(sch.stages, 0);
  size_t remaining = 0;
  for (const auto& list : sch.actions) remaining += list.size();
  while (remaining > 0) {
    bool progressed = false;
    for (int s = 0; s < sch.stages; ++s) {
      const auto& list = sch.actions[s];
      while (next[s] < list.size()) {
        const Action& a = list[next[s]];
        if (IsRecv(a.kind) && !posted.Has(MatchingTransfer(a))) break;
        if (IsSend(a.kind)) posted.Add(a);
        ++next[s];
        --remaining;
        progressed = true;
      }
    }
    if (!progressed) {
      for (int s = 0; s < sch.stages; ++s) {
        if (next[s] < sch.actions[s].size()) {
          const Action& a = sch.actions[s][next[s]];
          throw InputError(Concat("schedule deadlocks: stage ", s, " waits at ", FormatAction(a), " for ",
                                  FormatAction(MatchingTransfer(a)), ", which can never run"));
        }
      }
    }
  }
}

}  // namespace

void ValidateSchedule(const Schedule& sch) {
  if (sch.stages < 1 || sch.microbatches < 1) {
    throw InputError(Concat("schedule: ", sch.stages, " stages and ", sch.microbatches,
                            " micro-batches; expected at least 1 of each"));
  }
  if (int(sch.actions.size()) != sch.stages) {
    throw InputError(Concat("schedule: ", sch.actions.size(), " action lists for ", sch.stages, " stages"));
  }
  ActionSet seen(sch.stages, sch.microbatches);
  for (int s = 0; s < sch.stages; ++s) CheckStageList(sch, s, seen);
  for (int s = 0; s < sch.stages; ++s) {
    for (const Action& a : sch.actions[s]) {
      if (!IsCompute(a.kind) && !seen.Has(MatchingTransfer(a))) {
        throw InputError(Concat(Where(s, a), " has no matching ", FormatAction(MatchingTransfer(a)),
                                " on stage ", PeerStage(a)));
      }
    }
  }
  CheckNoDeadlock(sch);
}

}  // namespace mp
