// Schedules: the drawn orders, transfers paired, validation error paths.
#include <doctest/doctest.h>

#include <algorithm>

#include "common/error.h"
#include "planner/schedule/schedule.h"

using mp::ActionKind;
using mp::InputError;
using mp::ScheduleKind;

namespace {

std::string Computes(const mp::Schedule& s, int device) {
  return mp::FormatActions(mp::ComputeActions(s.actions[device]));
}

constexpr ScheduleKind kTraining[] = {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB, ScheduleKind::kZeroBubbleH1};

}  // namespace

TEST_CASE("schedule names parse and format") {
  for (auto kind : {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB, ScheduleKind::kForwardOnly,
                    ScheduleKind::kInterleaved1F1B, ScheduleKind::kZeroBubbleH1, ScheduleKind::kZeroBubbleV,
                    ScheduleKind::kDualPipeV}) {
    CHECK(mp::ParseScheduleKind(mp::ScheduleName(kind)) == kind);
  }
  CHECK(mp::ParseScheduleKind("ScheduleZBVZeroBubble") == ScheduleKind::kZeroBubbleV);
  CHECK(mp::ParseScheduleKind("ScheduleDualPipeV") == ScheduleKind::kDualPipeV);
  CHECK(mp::ParseScheduleKind("infer") == ScheduleKind::kForwardOnly);
  // torch.distributed.pipelining's class names.
  CHECK(mp::ParseScheduleKind("ScheduleInterleaved1F1B") == ScheduleKind::kInterleaved1F1B);
  CHECK(mp::ParseScheduleKind("Schedule1F1B") == ScheduleKind::kOneFOneB);
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

TEST_CASE("interleaved-1f1b: looped stages, forwards in groups of K per chunk, backwards chunks reversed") {
  auto s = mp::BuildSchedule(ScheduleKind::kInterleaved1F1B, 2, 4, 2);
  CHECK(s.stages == 4);
  CHECK(s.Devices() == 2);
  CHECK(s.DeviceOf(2) == 0);
  CHECK(s.DeviceOf(3) == 1);
  // Device 0 warms up with 2(K - 1) + (v - 1)K = 4 forwards.
  CHECK(Computes(s, 0) == "0F0 0F1 2F0 2F1 0F2 2B0 0F3 2B1 2F2 0B0 2F3 0B1 2B2 2B3 0B2 0B3");
  CHECK(Computes(s, 1) == "1F0 1F1 3F0 3B0 3F1 3B1 1F2 1B0 1F3 1B1 3F2 3B2 3F3 3B3 1B2 1B3");
  // Stage 1 sends to stage 2 on the other device, and stage 3 (the last) sends nothing forward.
  CHECK(mp::FormatActions(s.actions[1]).rfind("1RECV_F0 1F0 1SEND_F0", 0) == 0);
  CHECK(mp::FormatActions(s.actions[0]).find("2RECV_F0 2F0 2SEND_F0") != std::string::npos);
  mp::ValidateSchedule(s);
  CHECK_THROWS_WITH_AS(mp::BuildSchedule(ScheduleKind::kInterleaved1F1B, 2, 3, 2),
                       doctest::Contains("interleaved-1f1b needs M divisible by K"), InputError);
  CHECK_THROWS_WITH_AS(mp::BuildSchedule(ScheduleKind::kInterleaved1F1B, 2, 4, 1),
                       doctest::Contains("at least 2 stages per device"), InputError);
  CHECK_THROWS_WITH_AS(mp::BuildSchedule(ScheduleKind::kOneFOneB, 2, 4, 2),
                       doctest::Contains("1f1b runs one stage per device"), InputError);
}

TEST_CASE("zb-h1: 1f1b's order with I for B, stage s deferring its W by s I's") {
  auto s = mp::BuildSchedule(ScheduleKind::kZeroBubbleH1, 3, 4);
  CHECK(Computes(s, 0) == "0F0 0F1 0F2 0I0 0W0 0F3 0I1 0W1 0I2 0W2 0I3 0W3");
  CHECK(Computes(s, 1) == "1F0 1F1 1I0 1F2 1I1 1W0 1F3 1I2 1W1 1I3 1W2 1W3");
  CHECK(Computes(s, 2) == "2F0 2I0 2F1 2I1 2F2 2I2 2W0 2F3 2I3 2W1 2W2 2W3");
  // I sends the input gradients upstream; W sends nothing.
  CHECK(mp::FormatActions(s.actions[1]).find("1RECV_B0 1I0 1SEND_B0") != std::string::npos);
  mp::ValidateSchedule(s);
  // Every stage holds at most K micro-batches (1f1b's stage 0).
  for (int held : mp::MicrobatchesInFlight(s)) CHECK(held <= 3);
}

TEST_CASE("zb-h1 with one stage whole: its I become B, its W go, the others' lists are untouched") {
  const auto split = mp::BuildSchedule(ScheduleKind::kZeroBubbleH1, 3, 4);
  const auto s = mp::WithWholeBackward(split, {false, true, false});
  CHECK(Computes(s, 0) == Computes(split, 0));
  CHECK(Computes(s, 1) == "1F0 1F1 1B0 1F2 1B1 1F3 1B2 1B3");
  CHECK(Computes(s, 2) == Computes(split, 2));
  // B sends the input gradients where I did.
  CHECK(mp::FormatActions(s.actions[1]).find("1RECV_B0 1B0 1SEND_B0") != std::string::npos);
  mp::ValidateSchedule(s);
  // zbv: a device's two stages, one whole.
  mp::ValidateSchedule(mp::WithWholeBackward(mp::BuildSchedule(ScheduleKind::kZeroBubbleV, 2, 4, 2),
                                             {false, false, true, false}));
}

TEST_CASE("zbv: two stages per device in a V, I first, then F (the second chunk's first), then W") {
  auto s = mp::BuildSchedule(ScheduleKind::kZeroBubbleV, 2, 2, 2);
  CHECK(s.stages == 4);
  CHECK(s.stage_device == std::vector<int>{0, 1, 1, 0});
  CHECK(mp::StagePlacement(ScheduleKind::kZeroBubbleV, 3, 2) == std::vector<int>{0, 1, 2, 2, 1, 0});
  // The drawing in schedule.cpp.
  CHECK(Computes(s, 0) == "0F0 0F1 3F0 3I0 3F1 3I1 0I0 0W0 0I1 3W0 0W1 3W1");
  CHECK(Computes(s, 1) == "1F0 2F0 1F1 2F1 2I0 1I0 2I1 1I1 1W0 2W0 1W1 2W1");
  // The middle boundary stays on device 1: it sends to itself.
  CHECK(mp::FormatActions(s.actions[1]).find("1F0 1SEND_F0 2RECV_F0 2F0") != std::string::npos);
  CHECK(mp::FormatActions(s.actions[1]).find("2I0 2SEND_B0 1RECV_B0 1I0") != std::string::npos);
  mp::ValidateSchedule(s);
  // No device holds more than 2K chunks' activations at once, from F to W
  // (1f1b's K micro-batches of a whole device).
  for (int k = 2; k <= 8; ++k) {
    for (int m : {1, k, 2 * k + 1, 4 * k}) {
      const auto v = mp::BuildSchedule(ScheduleKind::kZeroBubbleV, k, m, 2);
      for (const auto& list : v.actions) {
        int held = 0, peak = 0;
        for (const auto& a : list) {
          held += (a.kind == ActionKind::kForward) - (a.kind == ActionKind::kBackwardWeight);
          peak = std::max(peak, held);
        }
        CHECK(peak <= 2 * k);
      }
    }
  }
  CHECK_THROWS_WITH_AS(mp::BuildSchedule(ScheduleKind::kZeroBubbleV, 2, 4, 3),
                       doctest::Contains("zbv runs 2 stages per device (a V), not 3"), InputError);
  CHECK_THROWS_WITH_AS(mp::BuildSchedule(ScheduleKind::kZeroBubbleV, 1, 4, 2),
                       doctest::Contains("zbv needs at least 2 devices"), InputError);
}

TEST_CASE("dualpipev: zbv's V in DualPipeV's eight phases, each F beside a B of the other chunk in the steady state") {
  auto s = mp::BuildSchedule(ScheduleKind::kDualPipeV, 2, 4, 2);
  CHECK(s.stage_device == std::vector<int>{0, 1, 1, 0});
  // The drawing in schedule.cpp.
  CHECK(Computes(s, 0) == "0F0 0F1 0F2 3F0 3I0 3W0 3F1 0F3 3B1 3F2 0B0 3B2 3F3 0B1 3B3 0I2 0W2 0I3 0W3");
  CHECK(Computes(s, 1) == "1F0 2F0 1F1 2F1 1F2 2B0 2F2 1B0 1F3 2B1 2F3 1B1 2B2 1B2 2I3 1I3 2W3 1W3");
  mp::ValidateSchedule(s);
  // Every micro-batch once per stage, by B or by I and W, at any K and M.
  for (int k = 2; k <= 6; ++k) {
    for (int m : {2 * k, 2 * k + 1, 4 * k, 5 * k + 3}) {
      CAPTURE(k);
      CAPTURE(m);
      const auto v = mp::BuildSchedule(ScheduleKind::kDualPipeV, k, m, 2);
      CHECK_NOTHROW(mp::ValidateSchedule(v));
      int i = 0, w = 0, b = 0;
      for (const auto& list : v.actions) {
        for (const auto& a : mp::ComputeActions(list)) {
          i += a.kind == ActionKind::kBackwardInput;
          w += a.kind == ActionKind::kBackwardWeight;
          b += a.kind == ActionKind::kBackward;
        }
      }
      CHECK(i == w);
      CHECK(b + i == 2 * k * m);
    }
  }
  CHECK_THROWS_WITH_AS(mp::BuildSchedule(ScheduleKind::kDualPipeV, 2, 3, 2),
                       doctest::Contains("dualpipev needs M >= 2K (3 micro-batches on 2 devices)"), InputError);
  CHECK_THROWS_WITH_AS(mp::BuildSchedule(ScheduleKind::kDualPipeV, 1, 4, 2),
                       doctest::Contains("dualpipev needs at least 2 devices"), InputError);
}

TEST_CASE("forward-only has no backward and no gradient transfers") {
  auto s = mp::BuildSchedule(ScheduleKind::kForwardOnly, 2, 3);
  CHECK(mp::FormatActions(s.actions[0]) == "0F0 0SEND_F0 0F1 0SEND_F1 0F2 0SEND_F2");
  CHECK(mp::FormatActions(s.actions[1]) == "1RECV_F0 1F0 1RECV_F1 1F1 1RECV_F2 1F2");
  mp::ValidateSchedule(s);
}

TEST_CASE("every generated schedule validates, and sends pair with receives") {
  for (auto kind : {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB, ScheduleKind::kForwardOnly,
                    ScheduleKind::kZeroBubbleH1, ScheduleKind::kInterleaved1F1B, ScheduleKind::kZeroBubbleV,
                    ScheduleKind::kDualPipeV}) {
    for (int k = 1; k <= 6; ++k) {
      for (int m = 1; m <= 9; ++m) {
        const int v = kind == ScheduleKind::kInterleaved1F1B ? 2 + m % 2 : mp::ChunksFor(kind, 0);
        if (!mp::ScheduleRuledOut(kind, k, m, v).empty()) continue;
        CAPTURE(mp::ScheduleName(kind));
        CAPTURE(k);
        CAPTURE(m);
        auto s = mp::BuildSchedule(kind, k, m, v);
        CHECK_NOTHROW(mp::ValidateSchedule(s));
        int sends = 0, recvs = 0, computes = 0, weights = 0;
        for (const auto& list : s.actions) {
          for (const auto& a : list) {
            sends += mp::IsSend(a.kind);
            recvs += mp::IsRecv(a.kind);
            computes += mp::IsCompute(a.kind);
            weights += a.kind == ActionKind::kBackwardWeight;
          }
        }
        const int passes = mp::IsTraining(kind) ? 2 : 1;
        CHECK(sends == recvs);
        CHECK(sends == passes * (k * v - 1) * m);
        // an F and a B or I per stage and micro-batch, and a W per I
        // (dualpipev runs I and W for some, its own test counts them)
        CHECK(computes - weights == passes * k * v * m);
        if (kind != ScheduleKind::kDualPipeV) CHECK(weights == (mp::SplitsBackward(kind) ? k * v * m : 0));
      }
    }
  }
}

TEST_CASE("in-flight micro-batches per stage") {
  using V = std::vector<int>;
  CHECK(mp::MicrobatchesInFlight(mp::BuildSchedule(ScheduleKind::kGPipe, 4, 8)) == V{8, 8, 8, 8});
  CHECK(mp::MicrobatchesInFlight(mp::BuildSchedule(ScheduleKind::kOneFOneB, 4, 8)) == V{4, 3, 2, 1});
  CHECK(mp::MicrobatchesInFlight(mp::BuildSchedule(ScheduleKind::kOneFOneB, 4, 2)) == V{2, 2, 2, 1});
  CHECK(mp::MicrobatchesInFlight(mp::BuildSchedule(ScheduleKind::kForwardOnly, 4, 8)) == V{1, 1, 1, 1});
  // zb-h1 holds a micro-batch until its W: later stages hold more than in 1f1b, none more than K.
  CHECK(mp::MicrobatchesInFlight(mp::BuildSchedule(ScheduleKind::kZeroBubbleH1, 4, 8)) == V{4, 4, 4, 4});
}

TEST_CASE("in-flight micro-batches without the lists are the lists' own, for every kind") {
  for (const ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB, ScheduleKind::kForwardOnly,
                                  ScheduleKind::kInterleaved1F1B, ScheduleKind::kZeroBubbleH1,
                                  ScheduleKind::kZeroBubbleV, ScheduleKind::kDualPipeV}) {
    const int v = mp::ChunksFor(kind, 0);
    for (int k = 1; k <= 5; ++k) {
      for (int m = 1; m <= 12; ++m) {
        CAPTURE(mp::ScheduleName(kind));
        CAPTURE(k);
        CAPTURE(m);
        if (!mp::ScheduleRuledOut(kind, k, m, v).empty()) {
          CHECK_THROWS_AS(mp::MicrobatchesInFlight(kind, k, m, v), InputError);
          continue;
        }
        CHECK(mp::MicrobatchesInFlight(kind, k, m, v) == mp::MicrobatchesInFlight(mp::BuildSchedule(kind, k, m, v)));
      }
    }
  }
}

TEST_CASE("BuildSchedule rejects empty requests") {
  CHECK_THROWS_WITH_AS(mp::BuildSchedule(ScheduleKind::kGPipe, 0, 4), doctest::Contains("0 devices"), InputError);
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
  CHECK_THROWS_WITH_AS(mp::ValidateSchedule(lonely), doctest::Contains("peer stage 1, which does not exist"),
                       InputError);
}

TEST_CASE("ValidateSchedule: I and W, stages on devices, and the grid in the message") {
  auto zb = mp::BuildSchedule(ScheduleKind::kZeroBubbleH1, 2, 2);
  auto with = [&](int device, const std::string& list) {
    auto s = zb;
    s.actions[device] = mp::ParseActions(list);
    return s;
  };
  CHECK_THROWS_WITH_AS(mp::ValidateSchedule(with(1, "1RECV_F0 1F0 1W0 1I0 1SEND_B0 1RECV_F1 1F1 1I1 1SEND_B1 1W1")),
                       doctest::Contains("schedule device 1 step 2: 1W0 comes before 1I0"), InputError);
  CHECK_THROWS_WITH_AS(mp::ValidateSchedule(with(1, "1RECV_F0 1F0 1I0 1SEND_B0 1RECV_F1 1F1 1I1 1SEND_B1 1W1")),
                       doctest::Contains("no 1W0"), InputError);
  CHECK_THROWS_WITH_AS(
      mp::ValidateSchedule(with(1, "1RECV_F0 1F0 1I0 1B0 1SEND_B0 1W0 1RECV_F1 1F1 1I1 1SEND_B1 1W1")),
      doctest::Contains("1B0 follows 1I0"), InputError);
  // The message ends with the grid around the step, one column per device.
  try {
    mp::ValidateSchedule(with(1, "1RECV_F0 1F0 1W0 1I0 1SEND_B0 1RECV_F1 1F1 1I1 1SEND_B1 1W1"));
    FAIL("expected an error");
  } catch (const InputError& e) {
    const std::string text = e.what();
    CHECK(text.find("\n          Rank 0    Rank 1") != std::string::npos);
    CHECK(text.find("Step 02:  0F1       1W0") != std::string::npos);
  }
  // Interleaved: stage 2 lives on device 0, so device 1 may not run it.
  auto looped = mp::BuildSchedule(ScheduleKind::kInterleaved1F1B, 2, 2, 2);
  std::swap(looped.actions[0], looped.actions[1]);
  CHECK_THROWS_WITH_AS(mp::ValidateSchedule(looped), doctest::Contains("names stage 1, which runs on device 1"),
                       InputError);
}

TEST_CASE("the schedule grid: one column per device, one row per step") {
  const auto s = mp::BuildSchedule(ScheduleKind::kOneFOneB, 2, 1);
  CHECK(mp::FormatScheduleGrid(s) ==
        "          Rank 0    Rank 1\n"
        "Step 00:  0F0       1RECV_F0\n"
        "Step 01:  0SEND_F0  1F0\n"
        "Step 02:  0RECV_B0  1B0\n"
        "Step 03:  0B0       1SEND_B0");
  CHECK(mp::FormatScheduleGrid(s, 1, 2) == "          Rank 0    Rank 1\nStep 01:  0SEND_F0  1F0");
}
