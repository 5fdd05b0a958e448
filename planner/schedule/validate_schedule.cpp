// ValidateSchedule: proves that a set of per-device action lists is one the
// executor can run. First each device's list on its own (its stages' F and
// B, or I and W, once per micro-batch, data received before it is used and
// produced before it is sent), then the pairs (each SEND has its RECV on
// the peer stage), then a replay with asynchronous sends and blocking
// receives that must reach every list's end. Every message names the
// device, the step and the action, and ends with the grid around it.
#include <algorithm>
#include <string>
#include <vector>

#include "common/error.h"
#include "planner/schedule/schedule.h"

namespace mp {
namespace {

// Flags per (kind, stage, micro-batch), for "seen on this stage" and "posted".
class ActionSet {
 public:
  ActionSet(int stages, int microbatches)
      : stages_(stages), microbatches_(microbatches), seen_(size_t(kActionKinds) * stages * microbatches, false) {}
  bool Has(const Action& a) const { return seen_[Index(a)]; }
  void Add(const Action& a) { seen_[Index(a)] = true; }

 private:
  size_t Index(const Action& a) const {
    return (size_t(a.kind) * stages_ + a.stage) * microbatches_ + a.microbatch;
  }
  int stages_, microbatches_;
  std::vector<bool> seen_;
};

constexpr int kGridContext = 3;  // steps shown on each side of a problem

[[noreturn]] void Fail(const Schedule& sch, int device, int step, const std::string& what) {
  const std::string where = step < 0 ? Concat("schedule device ", device, ": ")
                                     : Concat("schedule device ", device, " step ", step, ": ",
                                              FormatAction(sch.actions[device][step]), " ");
  const int at = std::max(step, 0);
  throw InputError(Concat(where, what, "\n", FormatScheduleGrid(sch, at - kGridContext, at + kGridContext + 1)));
}

void CheckDeviceList(const Schedule& sch, int d, ActionSet& seen) {
  const bool training = IsTraining(sch.kind);
  const int last = sch.stages - 1;
  const auto& list = sch.actions[d];
  for (int i = 0; i < int(list.size()); ++i) {
    const Action& a = list[i];
    auto fail = [&](const std::string& what) { Fail(sch, d, i, what); };
    if (a.stage < 0 || a.stage > last) fail(Concat("names stage ", a.stage, ", which does not exist (", sch.stages, " stages)"));
    if (sch.DeviceOf(a.stage) != d) fail(Concat("names stage ", a.stage, ", which runs on device ", sch.DeviceOf(a.stage)));
    if (a.microbatch < 0 || a.microbatch >= sch.microbatches) {
      fail(Concat("has micro-batch ", a.microbatch, " out of range (", sch.microbatches, " micro-batches)"));
    }
    if (!IsCompute(a.kind)) {
      const int peer = PeerStage(a);
      if (peer < 0 || peer > last) fail(Concat("has peer stage ", peer, ", which does not exist (", sch.stages, " stages)"));
    }
    if (seen.Has(a)) fail("appears twice");
    const int s = a.stage;
    const int m = a.microbatch;
    auto has = [&](ActionKind kind) { return seen.Has({s, kind, m}); };
    auto need = [&](ActionKind kind, const char* why) {
      if (!has(kind)) fail(Concat("comes before ", FormatAction({s, kind, m}), " ", why));
    };
    if (!training && a.kind != ActionKind::kForward && a.kind != ActionKind::kSendF &&
        a.kind != ActionKind::kRecvF) {
      fail("is a backward action in a forward-only schedule");
    }
    switch (a.kind) {
      case ActionKind::kForward:
        if (s > 0) need(ActionKind::kRecvF, "that receives its input");
        break;
      case ActionKind::kBackward:
      case ActionKind::kBackwardInput: {
        const ActionKind other = a.kind == ActionKind::kBackward ? ActionKind::kBackwardInput : ActionKind::kBackward;
        if (has(other)) fail(Concat("follows ", FormatAction({s, other, m}), ": a micro-batch runs B or I and W, not both"));
        need(ActionKind::kForward, "whose activations it needs");
        if (s < last) need(ActionKind::kRecvB, "that receives its gradient");
        break;
      }
      case ActionKind::kBackwardWeight:
        need(ActionKind::kBackwardInput, "whose gradients it needs");
        break;
      case ActionKind::kSendF: need(ActionKind::kForward, "that computes what it sends"); break;
      case ActionKind::kSendB:
        if (!has(ActionKind::kBackward)) need(ActionKind::kBackwardInput, "(or B) that computes what it sends");
        break;
      default: break;
    }
    seen.Add(a);
  }
}

void CheckComplete(const Schedule& sch, const ActionSet& seen) {
  const bool training = IsTraining(sch.kind);
  for (int s = 0; s < sch.stages; ++s) {
    for (int m = 0; m < sch.microbatches; ++m) {
      auto missing = [&](ActionKind kind) { Fail(sch, sch.DeviceOf(s), -1, Concat("no ", FormatAction({s, kind, m}))); };
      if (!seen.Has({s, ActionKind::kForward, m})) missing(ActionKind::kForward);
      if (!training) continue;
      if (seen.Has({s, ActionKind::kBackwardInput, m})) {
        if (!seen.Has({s, ActionKind::kBackwardWeight, m})) missing(ActionKind::kBackwardWeight);
      } else if (!seen.Has({s, ActionKind::kBackward, m})) {
        missing(ActionKind::kBackward);
      }
    }
  }
}

// Replays the lists: sends post at once, receives wait for their send.
void CheckNoDeadlock(const Schedule& sch) {
  ActionSet posted(sch.stages, sch.microbatches);
  std::vector<size_t> next(sch.Devices(), 0);
  size_t remaining = 0;
  for (const auto& list : sch.actions) remaining += list.size();
  while (remaining > 0) {
    bool progressed = false;
    for (int d = 0; d < sch.Devices(); ++d) {
      const auto& list = sch.actions[d];
      while (next[d] < list.size()) {
        const Action& a = list[next[d]];
        if (IsRecv(a.kind) && !posted.Has(MatchingTransfer(a))) break;
        if (IsSend(a.kind)) posted.Add(a);
        ++next[d];
        --remaining;
        progressed = true;
      }
    }
    if (progressed) continue;
    for (int d = 0; d < sch.Devices(); ++d) {
      if (next[d] < sch.actions[d].size()) {
        const Action& a = sch.actions[d][next[d]];
        Fail(sch, d, int(next[d]),
             Concat("waits for ", FormatAction(MatchingTransfer(a)), ", which can never run: the schedule deadlocks"));
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
  if (sch.stage_device.empty() ? sch.Devices() != sch.stages : int(sch.stage_device.size()) != sch.stages) {
    throw InputError(Concat("schedule: ", sch.Devices(), " device lists and ", sch.stage_device.size(),
                            " stage placements for ", sch.stages, " stages"));
  }
  for (int s = 0; s < sch.stages; ++s) {
    if (sch.DeviceOf(s) < 0 || sch.DeviceOf(s) >= sch.Devices()) {
      throw InputError(Concat("schedule: stage ", s, " on device ", sch.DeviceOf(s), " of ", sch.Devices()));
    }
  }
  ActionSet seen(sch.stages, sch.microbatches);
  for (int d = 0; d < sch.Devices(); ++d) CheckDeviceList(sch, d, seen);
  CheckComplete(sch, seen);
  for (int d = 0; d < sch.Devices(); ++d) {
    for (int i = 0; i < int(sch.actions[d].size()); ++i) {
      const Action& a = sch.actions[d][i];
      if (!IsCompute(a.kind) && !seen.Has(MatchingTransfer(a))) {
        Fail(sch, d, i, Concat("has no matching ", FormatAction(MatchingTransfer(a)), " on stage ", PeerStage(a)));
      }
    }
  }
  CheckNoDeadlock(sch);
}

std::string FormatScheduleGrid(const Schedule& sch, int from, int to) {
  size_t longest = 0;
  for (const auto& list : sch.actions) longest = std::max(longest, list.size());
  from = std::max(from, 0);
  to = std::min<int>(to, int(longest));
  // A row: a 10-wide label, then 10-wide cells, with no trailing spaces.
  constexpr size_t kWidth = 10;
  auto row = [&](const std::string& label, const std::vector<std::string>& cells) {
    std::string line = label;
    for (size_t c = 0; c < cells.size(); ++c) {
      if (cells[c].empty()) continue;
      line.resize(std::max(line.size(), (c + 1) * kWidth), ' ');
      line += cells[c];
    }
    return line;
  };
  std::vector<std::string> ranks;
  for (int d = 0; d < sch.Devices(); ++d) ranks.push_back(Concat("Rank ", d));
  std::string text = row("", ranks);
  for (int step = from; step < to; ++step) {
    std::vector<std::string> cells;
    for (const auto& list : sch.actions) cells.push_back(step < int(list.size()) ? FormatAction(list[step]) : "");
    text += "\n" + row(Concat("Step ", step < 10 ? "0" : "", step, ":"), cells);
  }
  return text;
}

}  // namespace mp
