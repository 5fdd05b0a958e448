// Formatting and parsing of pipeline actions ("0F3", "1RECV_B2"). The
// grammar is torch.distributed.pipelining's _Action string form restricted
// to the kinds mpexec runs: F, B (full backward), I and W (its input and
// weight halves) and the four transfers.
#include "planner/schedule/action.h"

#include <array>
#include <cctype>
#include <utility>

#include "common/error.h"

namespace mp {
namespace {

// Longest names first, so that "SEND_F" is not read as an unknown "S...".
constexpr std::array<std::pair<const char*, ActionKind>, kActionKinds> kKindNames = {{
    {"SEND_F", ActionKind::kSendF},
    {"RECV_F", ActionKind::kRecvF},
    {"SEND_B", ActionKind::kSendB},
    {"RECV_B", ActionKind::kRecvB},
    {"F", ActionKind::kForward},
    {"B", ActionKind::kBackward},
    {"I", ActionKind::kBackwardInput},
    {"W", ActionKind::kBackwardWeight},
}};

constexpr const char* kExpected = "expected <stage><kind><microbatch> with kind F, B, I, W, SEND_F, "
                                  "RECV_F, SEND_B or RECV_B, e.g. 0F3 or 1RECV_B2";

// Reads a run of digits at text[pos...] into value; false if none or too long.
bool ReadNumber(const std::string& text, size_t& pos, int& value) {
  const size_t start = pos;
  long long v = 0;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
    v = v * 10 + (text[pos] - '0');
    if (v > 1000000000) return false;
    ++pos;
  }
  value = static_cast<int>(v);
  return pos > start;
}

}  // namespace

bool IsCompute(ActionKind kind) { return !IsSend(kind) && !IsRecv(kind); }
bool IsBackward(ActionKind kind) { return kind == ActionKind::kBackward || kind == ActionKind::kBackwardInput; }
bool IsSend(ActionKind kind) { return kind == ActionKind::kSendF || kind == ActionKind::kSendB; }
bool IsRecv(ActionKind kind) { return kind == ActionKind::kRecvF || kind == ActionKind::kRecvB; }

int PeerStage(const Action& action) {
  switch (action.kind) {
    case ActionKind::kSendF:
    case ActionKind::kRecvB:
      return action.stage + 1;
    case ActionKind::kRecvF:
    case ActionKind::kSendB:
      return action.stage - 1;
    default:
      throw InternalError(Concat("PeerStage of compute action ", FormatAction(action)));
  }
}

Action MatchingTransfer(const Action& action) {
  Action peer{PeerStage(action), action.kind, action.microbatch};
  switch (action.kind) {
    case ActionKind::kSendF: peer.kind = ActionKind::kRecvF; break;
    case ActionKind::kRecvF: peer.kind = ActionKind::kSendF; break;
    case ActionKind::kSendB: peer.kind = ActionKind::kRecvB; break;
    case ActionKind::kRecvB: peer.kind = ActionKind::kSendB; break;
    default: break;
  }
  return peer;
}

std::string KindName(ActionKind kind) {
  for (const auto& [name, k] : kKindNames) {
    if (k == kind) return name;
  }
  throw InternalError("KindName: unknown ActionKind");
}

std::string FormatAction(const Action& action) {
  return Concat(action.stage, KindName(action.kind), action.microbatch);
}

Action ParseAction(const std::string& text) {
  Action action;
  size_t pos = 0;
  if (!ReadNumber(text, pos, action.stage)) {
    throw InputError(Concat("action '", text, "': no stage number; ", kExpected));
  }
  bool known = false;
  for (const auto& [name, kind] : kKindNames) {
    const std::string n = name;
    if (text.compare(pos, n.size(), n) == 0) {
      action.kind = kind;
      pos += n.size();
      known = true;
      break;
    }
  }
  if (!known) {
    size_t end = pos;
    while (end < text.size() && !std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
    throw InputError(Concat("action '", text, "': unknown kind '", text.substr(pos, end - pos), "'; ",
                            kExpected));
  }
  if (!ReadNumber(text, pos, action.microbatch) || pos != text.size()) {
    throw InputError(Concat("action '", text, "': no micro-batch number after the kind; ", kExpected));
  }
  return action;
}

std::string FormatActions(const std::vector<Action>& actions) {
  std::string out;
  for (const auto& action : actions) {
    if (!out.empty()) out += ' ';
    out += FormatAction(action);
  }
  return out;
}

std::vector<Action> ParseActions(const std::string& text) {
  std::vector<Action> actions;
  std::string token;
  auto flush = [&] {
    if (!token.empty()) actions.push_back(ParseAction(token));
    token.clear();
  };
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c)) || c == ',') {
      flush();
    } else {
      token += c;
    }
  }
  flush();
  return actions;
}

}  // namespace mp
