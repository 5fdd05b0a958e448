// Actions: torch.distributed.pipelining's string form, both ways.
#include <doctest/doctest.h>

#include "common/error.h"
#include "planner/schedule/action.h"

using mp::Action;
using mp::ActionKind;
using mp::InputError;

TEST_CASE("FormatAction writes the _Action string form") {
  CHECK(mp::FormatAction({0, ActionKind::kForward, 3}) == "0F3");
  CHECK(mp::FormatAction({1, ActionKind::kBackward, 2}) == "1B2");
  CHECK(mp::FormatAction({0, ActionKind::kSendF, 3}) == "0SEND_F3");
  CHECK(mp::FormatAction({1, ActionKind::kRecvF, 3}) == "1RECV_F3");
  CHECK(mp::FormatAction({1, ActionKind::kSendB, 3}) == "1SEND_B3");
  CHECK(mp::FormatAction({0, ActionKind::kRecvB, 3}) == "0RECV_B3");
  CHECK(mp::FormatAction({12, ActionKind::kForward, 105}) == "12F105");
  CHECK(mp::FormatAction({3, ActionKind::kBackwardInput, 5}) == "3I5");
  CHECK(mp::FormatAction({3, ActionKind::kBackwardWeight, 5}) == "3W5");
}

TEST_CASE("ParseAction inverts FormatAction for every kind") {
  for (auto kind : {ActionKind::kForward, ActionKind::kBackward, ActionKind::kSendF, ActionKind::kRecvF,
                    ActionKind::kSendB, ActionKind::kRecvB, ActionKind::kBackwardInput, ActionKind::kBackwardWeight}) {
    for (Action a : {Action{0, kind, 0}, Action{7, kind, 31}, Action{63, kind, 1000}}) {
      CHECK(mp::ParseAction(mp::FormatAction(a)) == a);
    }
  }
}

TEST_CASE("action lists round-trip and accept commas") {
  auto list = mp::ParseActions("0F0 0SEND_F0, 0F1\n0RECV_B0 0B0");
  REQUIRE(list.size() == 5);
  CHECK(list[3] == Action{0, ActionKind::kRecvB, 0});
  CHECK(mp::FormatActions(list) == "0F0 0SEND_F0 0F1 0RECV_B0 0B0");
  CHECK(mp::ParseActions("  ").empty());
}

TEST_CASE("peers and matching transfers") {
  CHECK(mp::PeerStage({0, ActionKind::kSendF, 3}) == 1);
  CHECK(mp::PeerStage({1, ActionKind::kRecvF, 3}) == 0);
  CHECK(mp::PeerStage({1, ActionKind::kSendB, 3}) == 0);
  CHECK(mp::PeerStage({0, ActionKind::kRecvB, 3}) == 1);
  CHECK(mp::MatchingTransfer({0, ActionKind::kSendF, 3}) == Action{1, ActionKind::kRecvF, 3});
  CHECK(mp::MatchingTransfer({0, ActionKind::kRecvB, 3}) == Action{1, ActionKind::kSendB, 3});
  CHECK_THROWS_AS(mp::PeerStage({0, ActionKind::kForward, 0}), mp::InternalError);
}

TEST_CASE("ParseAction rejects malformed actions and names them") {
  CHECK_THROWS_WITH_AS(mp::ParseAction("F3"), doctest::Contains("'F3': no stage number"), InputError);
  CHECK_THROWS_WITH_AS(mp::ParseAction("0X3"), doctest::Contains("unknown kind 'X'"), InputError);
  CHECK_THROWS_WITH_AS(mp::ParseAction("0SEND3"), doctest::Contains("unknown kind 'SEND'"), InputError);
  CHECK_THROWS_WITH_AS(mp::ParseAction("0F"), doctest::Contains("no micro-batch number"), InputError);
  CHECK_THROWS_WITH_AS(mp::ParseAction("0F3x"), doctest::Contains("'0F3x'"), InputError);
  CHECK_THROWS_AS(mp::ParseAction("-1F0"), InputError);
  CHECK_THROWS_AS(mp::ParseAction(""), InputError);
  CHECK_THROWS_AS(mp::ParseAction("0F99999999999"), InputError);
  CHECK_THROWS_WITH_AS(mp::ParseActions("0F0 1X2"), doctest::Contains("'1X2'"), InputError);
}
