// Schedules: the drawn orders, transfers paired, validation error paths.
#include <doctest/doctest.h>

#include "common/error.h"
#include "planner/schedule/schedule.h"

using mp::ActionKind;
using mp::InputError;
using mp::ScheduleKind;

namespace {

std::string Computes(const mp::Schedule& s, int stage) {
  return mp::FormatActions(mp::ComputeActions(s.actions[stage]));
}

}  // namespace

TEST_CASE("schedule names parse and format") {
  for (auto kind : {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB, ScheduleKind::kForwardOnly}) {
    CHECK(mp::ParseScheduleKind(mp::ScheduleName(kind)) == kind);
  }
  CHECK(mp::ParseScheduleKind("infer") == ScheduleKind::kForwardOnly);
  CHECK_THROWS_WITH_AS(mp::ParseScheduleKind("pipedream"), doctest::Contains("'pipedream'"), InputError);
}

TEST_CASE("gpipe: all forwards, then all backwards") {
  auto s = mp::BuildSchedule(ScheduleKind::kGPipe, 3, 4);
  CHECK(Computes(s, 0) == "0F0 0F1 0F2 0F3 0B0 0B1 0B2 0B3");
  CHECK(Computes(s, 2) == "2F0 2F1 2F2 2F3 2B0 2B1 2B2 2B3");
  CHECK(mp::FormatActions(s.actions[1]).rfind("1RECV_F0 1F0 1SEND_F0 1RECV_F1", 0) == 0);
  mp::ValidateSchedule(s);
}

TEST_CASE("1f1b: warm-up, steady one-forward-one-backward, cool-down") {
  auto s = mp::BuildSchedule(ScheduleKind::kOneFOneB, 3, 4);
  CHECK(Computes(s, 0) == "0F0 0F1 0F2 0B0 0F3 0B1 0B2 0B3");
  CHECK(Computes(s, 1) == "1F0 1F1 1B0 1F2 1B1 1F3 1B2 1B3");
  CHECK(Computes(s, 2) == "2F0 2B0 2F1 2B1 2F2 2B2 2F3 2B3");
  CHECK(mp::FormatActions(s.actions[2]).rfind("2RECV_F0 2F0 2B0 2SEND_B0", 0) == 0);
  CHECK(mp::FormatActions(s.actions[0]).find("0RECV_B0 0B0 0F3") != std::string::npos);
  mp::ValidateSchedule(s);
  // Fewer micro-batches than stages: warm-up is cut short.
  auto few = mp::BuildSchedule(ScheduleKind::kOneFOneB, 4, 2);
  CHECK(Computes(few, 0) == "0F0 0F1 0B0 0B1");
  mp::ValidateSchedule(few);
}

TEST_CASE("forward-only has no backward and no gradient transfers") {
  auto s = mp::BuildSchedule(ScheduleKind::kForwardOnly, 2, 3);
  CHECK(mp::FormatActions(s.actions[0]) == "0F0 0SEND_F0 0F1 0SEND_F1 0F2 0SEND_F2");
  CHECK(mp::FormatActions(s.actions[1]) == "1RECV_F0 1F0 1RECV_F1 1F1 1RECV_F2 1F2");
  mp::ValidateSchedule(s);
}

TEST_CASE("every generated schedule validates, and sends pair with receives") {
  for (auto kind : {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB, ScheduleKind::kForwardOnly}) {
    for (int k = 1; k <= 6; ++k) {
      for (int m = 1; m <= 9; ++m) {
        auto s = mp::BuildSchedule(kind, k, m);
        CHECK_NOTHROW(mp::ValidateSchedule(s));
        int sends = 0, recvs = 0, computes = 0;
        for (const auto& list : s.actions) {
          for (const auto& a : list) {
            sends += mp::IsSend(a.kind);
            recvs += mp::IsRecv(a.kind);
            computes += mp::IsCompute(a.kind);
          }
        }
        const int passes = mp::IsTraining(kind) ? 2 : 1;
        CHECK(sends == recvs);
        CHECK(sends == passes * (k - 1) * m);
        CHECK(computes == passes * k * m);
      }
    }
  }
}

TEST_CASE("in-flight micro-batches per stage") {
  CHECK(mp::MicrobatchesInFlight(ScheduleKind::kGPipe, 4, 8, 0) == 8);
  CHECK(mp::MicrobatchesInFlight(ScheduleKind::kOneFOneB, 4, 8, 0) == 4);
  CHECK(mp::MicrobatchesInFlight(ScheduleKind::kOneFOneB, 4, 8, 3) == 1);
  CHECK(mp::MicrobatchesInFlight(ScheduleKind::kOneFOneB, 4, 2, 0) == 2);
  CHECK(mp::MicrobatchesInFlight(ScheduleKind::kForwardOnly, 4, 8, 0) == 1);
}

TEST_CASE("BuildSchedule rejects empty requests") {
  CHECK_THROWS_WITH_AS(mp::BuildSchedule(ScheduleKind::kGPipe, 0, 4), doctest::Contains("0 stages"), InputError);
  CHECK_THROWS_WITH_AS(mp::BuildSchedule(ScheduleKind::kGPipe, 2, 0), doctest::Contains("0 micro-batches"),
                       InputError);
}

TEST_CASE("ValidateSchedule names what is wrong") {
  auto base = mp::BuildSchedule(ScheduleKind::kOneFOneB, 2, 2);
  auto with = [&](int stage, const std::string& list) {
    auto s = base;
    s.actions[stage] = mp::ParseActions(list);
    return s;
  };
  // Missing receive: the SEND on stage 0 has no partner.
  CHECK_THROWS_WITH_AS(mp::ValidateSchedule(with(1, "1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1")),
                       doctest::Contains("1F0 comes before 1RECV_F0"), InputError);
  CHECK_THROWS_WITH_AS(
      mp::ValidateSchedule(with(0, "0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0B1")),
      doctest::Contains("0B1 comes before 0RECV_B1"), InputError);
  CHECK_THROWS_WITH_AS(mp::ValidateSchedule(with(0, "0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1")),
                       doctest::Contains("no 0B1"), InputError);
  CHECK_THROWS_WITH_AS(mp::ValidateSchedule(with(0, "0SEND_F0 0F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1")),
                       doctest::Contains("0SEND_F0 comes before 0F0"), InputError);
  CHECK_THROWS_WITH_AS(mp::ValidateSchedule(with(0, "0F0 0SEND_F0 0F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1")),
                       doctest::Contains("0F0 appears twice"), InputError);
  CHECK_THROWS_WITH_AS(mp::ValidateSchedule(with(0, "0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1 0F5")),
                       doctest::Contains("micro-batch 5 out of range"), InputError);
  CHECK_THROWS_WITH_AS(mp::ValidateSchedule(with(1, "0F0")), doctest::Contains("names stage 0"), InputError);
  // Stage 0 sends micro-batch 1 only, stage 1 expects 0 and 1.
  CHECK_THROWS_WITH_AS(mp::ValidateSchedule(with(0, "0F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1")),
                       doctest::Contains("1RECV_F0 has no matching 0SEND_F0 on stage 0"), InputError);
  // Both stages wait on each other: stage 0 wants a gradient before it sends.
  CHECK_THROWS_WITH_AS(
      mp::ValidateSchedule(with(0, "0F0 0F1 0RECV_B0 0SEND_F0 0SEND_F1 0B0 0RECV_B1 0B1")),
      doctest::Contains("deadlocks"), InputError);
  auto forward = mp::BuildSchedule(ScheduleKind::kForwardOnly, 1, 1);
  forward.actions[0] = mp::ParseActions("0F0 0B0");
  CHECK_THROWS_WITH_AS(mp::ValidateSchedule(forward), doctest::Contains("forward-only"), InputError);
  auto lonely = mp::BuildSchedule(ScheduleKind::kForwardOnly, 1, 1);
  lonely.actions[0] = mp::ParseActions("0F0 0SEND_F0");
  CHECK_THROWS_WITH_AS(mp::ValidateSchedule(lonely), doctest::Contains("peer stage 1 does not exist"), InputError);
}
