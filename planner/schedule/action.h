// One step of a stage's pipeline program, in the action grammar of
// torch.distributed.pipelining (its _Action string form): `<stage><kind><mb>`,
// e.g. `0F3` (stage 0 runs the forward of micro-batch 3), `1B2` (its full
// backward), `1I2` and `1W2` (the backward split in two, for zero-bubble
// schedules: I the gradients of the stage's inputs, W later those of its
// weights), and the transfers `0SEND_F3`, `1RECV_F3`, `1SEND_B3`,
// `0RECV_B3`. The stage in an
// action is always the stage that performs it; a SEND/RECV's peer is the
// neighbouring stage (stage + 1 for SEND_F/RECV_B, stage - 1 for RECV_F/SEND_B).
#pragma once

#include <string>
#include <vector>

namespace mp {

enum class ActionKind { kForward, kBackward, kSendF, kRecvF, kSendB, kRecvB, kBackwardInput, kBackwardWeight };
constexpr int kActionKinds = 8;

struct Action {
  int stage = 0;
  ActionKind kind = ActionKind::kForward;
  int microbatch = 0;

  bool operator==(const Action& o) const {
    return stage == o.stage && kind == o.kind && microbatch == o.microbatch;
  }
  bool operator!=(const Action& o) const { return !(*this == o); }
};

// One action on a timeline, in ms from the start of the step: what the
// simulator predicts (F/B on the device, a SEND on the link, a RECV its
// wait) and what the runtime records as it runs a plan, so the two compare
// directly.
struct TimedAction {
  Action action;
  double start_ms = 0;
  double end_ms = 0;
};

bool IsCompute(ActionKind kind);  // F, B, I or W
bool IsBackward(ActionKind kind); // B or I: what sends gradients upstream
bool IsSend(ActionKind kind);     // SEND_F or SEND_B
bool IsRecv(ActionKind kind);     // RECV_F or RECV_B

// The stage on the other end of a SEND/RECV; throws InternalError for F/B.
int PeerStage(const Action& action);

// The action on the peer stage that completes a SEND or RECV:
// 0SEND_F3 <-> 1RECV_F3, 1SEND_B3 <-> 0RECV_B3.
Action MatchingTransfer(const Action& action);

// "F", "B", "I", "W", "SEND_F", ...
std::string KindName(ActionKind kind);

// "0F3"; ParseAction is its inverse and throws InputError naming the text
// and what was expected for anything else ("0X3", "F3", "0F", "-1F0").
std::string FormatAction(const Action& action);
Action ParseAction(const std::string& text);

// Space-separated lists: "0F0 0SEND_F0 0F1"; parsing also accepts commas.
std::string FormatActions(const std::vector<Action>& actions);
std::vector<Action> ParseActions(const std::string& text);

}  // namespace mp
