// ReplayOrder: every action once, each device's in its list's order, every
// RECV after its SEND; a schedule's times the same whether its order is
// worked out per simulation or once for many; the errors it names; a
// replay that gives up once its step cannot beat the caller's.
#include <doctest/doctest.h>

#include <cmath>
#include <initializer_list>
#include <limits>
#include <map>
#include <random>
#include <tuple>

#include "common/error.h"
#include "planner/schedule/replay_order.h"
#include "planner/schedule/simulator.h"

using mp::ScheduleKind;

namespace {

const ScheduleKind kKinds[] = {ScheduleKind::kGPipe,         ScheduleKind::kOneFOneB,     ScheduleKind::kForwardOnly,
                               ScheduleKind::kInterleaved1F1B, ScheduleKind::kZeroBubbleH1, ScheduleKind::kZeroBubbleV,
                               ScheduleKind::kDualPipeV};

// Calls visit(schedule, its replay order) for every kind at 2 to 4
// devices and each of `microbatches` the kind takes there.
template <typename Visit>
void EachSchedule(std::initializer_list<int> microbatches, Visit visit) {
  for (const ScheduleKind kind : kKinds) {
    const int v = mp::ChunksFor(kind, 0);
    for (int k = 2; k <= 4; ++k) {
      for (int m : microbatches) {
        if (!mp::ScheduleRuledOut(kind, k, m, v).empty()) continue;
        CAPTURE(mp::ScheduleName(kind));
        CAPTURE(k);
        CAPTURE(m);
        const mp::Schedule sch = mp::BuildSchedule(kind, k, m, v);
        visit(sch, mp::OrderForReplay(sch));
      }
    }
  }
}

}  // namespace

TEST_CASE("the replay order holds every action once, in list order, each RECV after its SEND") {
  EachSchedule({1, 4, 9}, [](const mp::Schedule& sch, const mp::ReplayOrder& order) {
    size_t actions = 0;
    for (const auto& list : sch.actions) actions += list.size();
    REQUIRE(order.steps.size() == actions);
    std::vector<int> next(sch.Devices(), 0);
    std::map<std::tuple<int, int, int>, bool> sent;  // (forward, boundary, micro-batch)
    for (const mp::ReplayStep& st : order.steps) {
      REQUIRE(st.index == next[st.device]++);
      const mp::Action& a = sch.actions[st.device][st.index];
      CHECK(st.stage == a.stage);
      if (mp::IsCompute(a.kind)) {
        CHECK(st.op == mp::ReplayStep::kCompute);
        continue;
      }
      const auto key = std::make_tuple(st.forward, st.boundary, a.microbatch);
      if (mp::IsSend(a.kind)) {
        CHECK(st.op == mp::ReplayStep::kSend);
        sent[key] = true;
      } else {
        CHECK(st.op == mp::ReplayStep::kRecv);
        CHECK(sent.count(key) == 1);
      }
    }
  });
}

TEST_CASE("a schedule simulated with its order worked out once times as one worked out each time") {
  // Unequal stages, transfers and contention (the rounds replay the same order).
  for (const ScheduleKind kind : {ScheduleKind::kOneFOneB, ScheduleKind::kZeroBubbleV, ScheduleKind::kDualPipeV}) {
    CAPTURE(mp::ScheduleName(kind));
    const int v = mp::ChunksFor(kind, 0);
    const mp::Schedule sch = mp::BuildSchedule(kind, 3, 6, v);
    std::vector<mp::StageTimes> times;
    std::vector<mp::TransferTimes> transfers;
    for (int s = 0; s < sch.stages; ++s) {
      times.push_back({1.0 + 0.3 * s, 2.0 + 0.1 * s, 1.1, 0.9 + 0.05 * s});
      if (s + 1 < sch.stages) transfers.push_back({0.2 * s, 0.1 + 0.1 * s});
    }
    const std::vector<double> slowdown = {1.0, 1.3, 1.7};
    const mp::ReplayOrder order = mp::OrderForReplay(sch);
    const mp::SimResult each = mp::SimulateStep(sch, times, transfers, {}, {}, slowdown);
    const mp::SimResult once = mp::SimulateStep(sch, times, transfers, {}, {}, slowdown, 0, {}, 0, true, &order);
    CHECK(once.step_ms == each.step_ms);
    CHECK(once.busy_ms == each.busy_ms);
    CHECK(once.idle_ms == each.idle_ms);
    REQUIRE(once.timeline.size() == each.timeline.size());
    for (size_t d = 0; d < each.timeline.size(); ++d) {
      REQUIRE(once.timeline[d].size() == each.timeline[d].size());
      for (size_t i = 0; i < each.timeline[d].size(); ++i) {
        CHECK(once.timeline[d][i].action == each.timeline[d][i].action);
        CHECK(once.timeline[d][i].start_ms == each.timeline[d][i].start_ms);
        CHECK(once.timeline[d][i].end_ms == each.timeline[d][i].end_ms);
      }
    }
    CHECK(each.step_ms > mp::SimulateStep(sch, times, transfers).step_ms);  // contention slowed it
  }
}

TEST_CASE("the replay order names a bad action and a deadlock, and another schedule's order is refused") {
  mp::Schedule sch = mp::BuildSchedule(ScheduleKind::kGPipe, 2, 2);
  sch.actions[1][0] = mp::Action{1, mp::ActionKind::kForward, 5};
  CHECK_THROWS_WITH_AS(mp::OrderForReplay(sch), doctest::Contains("1F5 stage or micro-batch out of range (2 stages, 2"),
                       mp::InputError);
  sch = mp::BuildSchedule(ScheduleKind::kGPipe, 2, 2);
  sch.actions[0][0] = mp::Action{0, mp::ActionKind::kRecvF, 0};
  CHECK_THROWS_WITH_AS(mp::OrderForReplay(sch), doctest::Contains("0RECV_F0 has no peer stage"), mp::InputError);
  sch = mp::BuildSchedule(ScheduleKind::kGPipe, 2, 2);
  sch.actions[0] = mp::ParseActions("0F0 0F1 0RECV_B0 0SEND_F0 0SEND_F1 0B0 0RECV_B1 0B1");
  CHECK_THROWS_WITH_AS(mp::OrderForReplay(sch), doctest::Contains("deadlocks on device 0 at action 0RECV_B0"),
                       mp::InputError);
  // Another schedule's order is refused, not read past its end.
  const mp::Schedule two = mp::BuildSchedule(ScheduleKind::kGPipe, 2, 2);
  const mp::ReplayOrder three = mp::OrderForReplay(mp::BuildSchedule(ScheduleKind::kGPipe, 2, 3));
  CHECK_THROWS_WITH_AS(mp::SimulateStep(two, {{1, 1}, {1, 1}}, {}, {}, {}, {}, 0, {}, 0, false, &three),
                       doctest::Contains("a replay order of 24 steps for 16 actions"), mp::InternalError);
}

TEST_CASE("a replay told the step to beat comes back whole below it and gives up only where the step reaches it") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> ms(0.2, 3.0);
  int gave_up = 0, whole = 0;
  EachSchedule({2, 4, 8}, [&](const mp::Schedule& sch, const mp::ReplayOrder& order) {
    // Each compute time once per action of its stage and kind (F, B, I, W).
    const std::map<mp::ActionKind, int> slot = {{mp::ActionKind::kForward, 0},
                                                {mp::ActionKind::kBackward, 1},
                                                {mp::ActionKind::kBackwardInput, 2},
                                                {mp::ActionKind::kBackwardWeight, 3}};
    std::vector<int> uses(size_t(sch.stages) * 4, 0);
    for (const auto& list : sch.actions) {
      for (const mp::Action& a : list) {
        if (mp::IsCompute(a.kind)) ++uses[size_t(a.stage) * 4 + slot.at(a.kind)];
      }
    }
    CHECK(order.uses == uses);
    std::vector<mp::StageTimes> times;
    std::vector<mp::TransferTimes> transfers;
    std::vector<double> allreduce, optimizer;
    for (int s = 0; s < sch.stages; ++s) {
      times.push_back({ms(rng), ms(rng), ms(rng), ms(rng)});
      if (s + 1 < sch.stages) transfers.push_back({0.3 * ms(rng), 0.3 * ms(rng)});
      allreduce.push_back(0.1 * ms(rng));
      optimizer.push_back(0.1 * ms(rng));
    }
    for (const bool contention : {false, true}) {
      const std::vector<double> slowdown = contention ? std::vector<double>{1.0, 1.2, 1.5} : std::vector<double>{};
      const auto simulate = [&](double beat) {
        return mp::SimulateStep(sch, times, transfers, {}, allreduce, slowdown, 0.4, optimizer, 0.05, false, &order,
                                beat);
      };
      const mp::SimResult full = simulate(std::numeric_limits<double>::infinity());
      for (const double f : {0.5, 0.9, 0.99, 1 - 1e-9, 1.0, 1 + 1e-9, 1.01, 2.0}) {
        CAPTURE(contention);
        CAPTURE(f);
        const mp::SimResult r = simulate(full.step_ms * f);
        if (std::isinf(r.step_ms)) {
          CHECK(f <= 1.0);  // only where the step reaches the line
          ++gave_up;
        } else {
          CHECK(r.step_ms == full.step_ms);
          CHECK(r.busy_ms == full.busy_ms);
          CHECK(r.idle_ms == full.idle_ms);
          CHECK(r.bubble_fraction == full.bubble_fraction);
          ++whole;
        }
        if (f > 1) CHECK(r.step_ms == full.step_ms);  // below the line: whole
        if (f == 0.5) CHECK(std::isinf(r.step_ms));  // twice the line: the slowest device reaches it
      }
    }
  });
  CHECK(gave_up > 100);
  CHECK(whole > 100);
}
