// OrderForReplay: the lists' actions in rounds over the devices, each
// device placing actions until it meets a RECV whose SEND is not placed.
// O(actions + rounds * devices).
#include "planner/schedule/replay_order.h"

#include <algorithm>

#include "common/error.h"

namespace mp {
namespace {

int TimesOf(ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward: return 0;
    case ActionKind::kBackward: return 1;
    case ActionKind::kBackwardInput: return 2;
    default: return 3;
  }
}

}  // namespace

ReplayOrder OrderForReplay(const Schedule& sch) {
  const int S = sch.stages;
  const int D = sch.Devices();
  const int M = sch.microbatches;
  ReplayOrder order;
  const int boundaries = std::max(S - 1, 0);
  order.transfers = 2 * boundaries * M;
  order.lanes = 2 * S;
  order.uses.assign(size_t(S) * 4, 0);
  std::vector<char> placed(size_t(order.transfers), 0);  // a SEND's slot, once placed
  std::vector<size_t> next(D, 0);
  size_t remaining = 0;
  for (const auto& list : sch.actions) remaining += list.size();
  order.steps.reserve(remaining);
  while (remaining > 0) {
    bool progressed = false;
    for (int d = 0; d < D; ++d) {
      const auto& list = sch.actions[d];
      while (next[d] < list.size()) {
        const Action& a = list[next[d]];
        const int s = a.stage;
        if (s < 0 || s >= S || a.microbatch < 0 || a.microbatch >= M) {
          throw InputError(Concat("simulate: ", FormatAction(a), " stage or micro-batch out of range (", S,
                                  " stages, ", M, " micro-batches)"));
        }
        ReplayStep step;
        step.device = d;
        step.index = int(next[d]);
        step.stage = s;
        if (IsCompute(a.kind)) {
          step.op = ReplayStep::kCompute;
          step.times = s * 4 + TimesOf(a.kind);
          ++order.uses[size_t(step.times)];
        } else {
          const int peer = PeerStage(a);
          if (peer < 0 || peer >= S) throw InputError(Concat("simulate: ", FormatAction(a), " has no peer stage"));
          step.boundary = std::min(s, peer);
          step.forward = a.kind == ActionKind::kSendF || a.kind == ActionKind::kRecvF;
          const int dir = step.forward ? 0 : 1;
          step.transfer = (dir * boundaries + step.boundary) * M + a.microbatch;
          step.lane = dir * S + step.boundary;
          if (IsSend(a.kind)) {
            step.op = ReplayStep::kSend;
            placed[step.transfer] = 1;
          } else {
            if (!placed[step.transfer]) break;  // blocked until the peer sends
            step.op = ReplayStep::kRecv;
          }
        }
        order.steps.push_back(step);
        ++next[d];
        --remaining;
        progressed = true;
      }
    }
    if (!progressed) {
      for (int d = 0; d < D; ++d) {
        if (next[d] < sch.actions[d].size()) {
          throw InputError(Concat("simulate: schedule deadlocks on device ", d, " at action ",
                                  FormatAction(sch.actions[d][next[d]])));
        }
      }
    }
  }
  return order;
}

}  // namespace mp
