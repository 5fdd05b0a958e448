// Simulator: closed forms for equal stages, the drawn schedules slot by slot,
// and hand-timed runs with unequal stages and transfers.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "common/error.h"
#include "planner/schedule/simulator.h"

using doctest::Approx;
using mp::ScheduleKind;

namespace {

// Compute actions' start slots of one stage: "F0@0 F1@1 ...".
std::string Starts(const mp::SimResult& r, int stage) {
  std::string out;
  for (const auto& t : r.timeline[stage]) {
    if (!mp::IsCompute(t.action.kind)) continue;
    if (!out.empty()) out += ' ';
    out += mp::KindName(t.action.kind) + std::to_string(t.action.microbatch) + "@" +
           std::to_string(int(t.start_ms + 0.5));
  }
  return out;
}

// (start, end) of one action on a stage's timeline.
std::pair<double, double> Span(const mp::SimResult& r, int stage, const std::string& action) {
  for (const auto& t : r.timeline[stage]) {
    if (mp::FormatAction(t.action) == action) return {t.start_ms, t.end_ms};
  }
  FAIL("no action " << action << " on stage " << stage);
  return {0, 0};
}

}  // namespace

TEST_CASE("equal stages, no communication: (M + K - 1) t and bubble (K - 1) / (M + K - 1)") {
  for (auto kind : {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB, ScheduleKind::kForwardOnly}) {
    for (int k = 1; k <= 6; ++k) {
      for (int m = 1; m <= 10; ++m) {
        for (auto [f, b] : {std::pair{1.0, 2.0}, std::pair{0.7, 0.7}}) {
          const double t = f + (mp::IsTraining(kind) ? b : 0);
          auto r = mp::SimulateStep(mp::BuildSchedule(kind, k, m), std::vector<mp::StageTimes>(k, {f, b}));
          CAPTURE(mp::ScheduleName(kind));
          CAPTURE(k);
          CAPTURE(m);
          CHECK(r.step_ms == Approx((m + k - 1) * t));
          CHECK(r.bubble_fraction == Approx(double(k - 1) / (m + k - 1)));
          for (int s = 0; s < k; ++s) {
            CHECK(r.busy_ms[s] == Approx(m * t));
            CHECK(r.idle_ms[s] == Approx((k - 1) * t));
            CHECK(r.max_in_flight[s] == mp::MicrobatchesInFlight(mp::BuildSchedule(kind, k, m))[s]);
          }
        }
      }
    }
  }
}

TEST_CASE("interleaved-1f1b: bubble (K - 1) / (v M) of the work, against 1f1b's (K - 1) / M") {
  for (int k = 2; k <= 4; ++k) {
    for (int v = 2; v <= 3; ++v) {
      for (int m = k; m <= 4 * k; m += k) {
        CAPTURE(k);
        CAPTURE(v);
        CAPTURE(m);
        // A stage of the 1f1b plan is v chunks: each chunk takes 1/v of its F and B.
        const double f = 1, b = 2;
        const auto sch = mp::BuildSchedule(ScheduleKind::kInterleaved1F1B, k, m, v);
        const auto r = mp::SimulateStep(sch, std::vector<mp::StageTimes>(k * v, {f / v, b / v}));
        const double work = m * (f + b);
        for (int d = 0; d < k; ++d) {
          CHECK(r.device_busy_ms[d] == Approx(work));
          CHECK(r.idle_ms[d] / work == Approx(double(k - 1) / (v * m)));
        }
        const auto onef = mp::SimulateStep(mp::BuildSchedule(ScheduleKind::kOneFOneB, k, m),
                                           std::vector<mp::StageTimes>(k, {f, b}));
        CHECK(onef.idle_ms[0] / work == Approx(double(k - 1) / m));
        CHECK(r.step_ms < onef.step_ms);
      }
    }
  }
}

TEST_CASE("zb-h1: with T_F = T_I = T_W the bubble is a third of 1f1b's") {
  for (int k = 2; k <= 6; ++k) {
    for (int m = k; m <= 3 * k; ++m) {
      CAPTURE(k);
      CAPTURE(m);
      mp::StageTimes t;
      t.forward_ms = 1;
      t.backward_ms = 2;  // B = I + W
      t.input_backward_ms = 1;
      t.weight_backward_ms = 1;
      const std::vector<mp::StageTimes> times(k, t);
      const auto zb = mp::SimulateStep(mp::BuildSchedule(ScheduleKind::kZeroBubbleH1, k, m), times);
      const auto onef = mp::SimulateStep(mp::BuildSchedule(ScheduleKind::kOneFOneB, k, m), times);
      CHECK(onef.step_ms == Approx(3.0 * (m + k - 1)));
      CHECK(zb.step_ms == Approx(3.0 * m + (k - 1)));
      for (int d = 0; d < k; ++d) CHECK(zb.idle_ms[d] == Approx(onef.idle_ms[d] / 3));
    }
  }
}

TEST_CASE("zb-h1: what I keeps for W is held from each micro-batch's I to its W") {
  // 2 stages, 4 micro-batches, I = W: stage 0's lists hold its W until
  // the cool-down (0F0 0F1 0I0 ... 0W0 late), stage 1 runs each W right
  // after its I.
  mp::StageTimes t;
  t.forward_ms = 1;
  t.backward_ms = 2;
  t.input_backward_ms = 1;
  t.weight_backward_ms = 1;
  const auto sch = mp::BuildSchedule(ScheduleKind::kZeroBubbleH1, 2, 4);
  const std::vector<mp::StageMemory> plain = {{0, 10}, {0, 10}};
  std::vector<mp::StageMemory> kept = plain;
  for (auto& m : kept) m.weight_gradient_bytes = 1000;
  const auto a = mp::SimulateStep(sch, {t, t}, {}, plain);
  const auto b = mp::SimulateStep(sch, {t, t}, {}, kept);
  CHECK(b.step_ms == Approx(a.step_ms));  // memory only
  for (int s = 0; s < 2; ++s) {
    CAPTURE(s);
    // The most micro-batches past their I at once, from the lists.
    int between = 0, most = 0;
    for (const mp::Action& x : sch.actions[s]) {
      if (x.kind == mp::ActionKind::kBackwardInput) most = std::max(most, ++between);
      if (x.kind == mp::ActionKind::kBackwardWeight) --between;
    }
    REQUIRE(most >= 1);
    CHECK(b.peak_memory_bytes[s] == a.peak_memory_bytes[s] + 1000 * most);
    CHECK(b.device_peak_memory_bytes[s] > a.device_peak_memory_bytes[s]);
    CHECK(b.device_peak_memory_bytes[s] <= a.device_peak_memory_bytes[s] + 1000 * most);
  }
}

// mpexec clears the gradients before each step and the first B of a stage
// makes them: GPipe's peak, after every forward, holds none of them, and
// 1F1B's, a micro-batch and the gradients, is what holding them all step
// long would give. (Charged as static, GPT's GPipe devices were predicted
// up to 20% high: its gradients are most of a micro-batch's activations.)
TEST_CASE("a stage's gradients are held from its first backward, not from the step's start") {
  mp::StageTimes t;
  t.forward_ms = 1;
  t.backward_ms = 2;
  mp::StageMemory memory{100, 10};  // static 100 (parameters, gradients, state), 10 per micro-batch
  memory.gradient_bytes = 40;
  const auto gpipe = mp::SimulateStep(mp::BuildSchedule(ScheduleKind::kGPipe, 1, 4), {t}, {}, {memory});
  // 4 micro-batches held after the forwards (40), or 3 and the gradients
  // after the first B (70): 60 of static besides.
  CHECK(gpipe.device_peak_memory_bytes[0] == 60 + 70);
  const auto one_f_one_b = mp::SimulateStep(mp::BuildSchedule(ScheduleKind::kOneFOneB, 1, 4), {t}, {}, {memory});
  CHECK(one_f_one_b.device_peak_memory_bytes[0] == 100 + 10);
  memory.gradient_bytes = 0;  // all static, as before 2026-11-27
  CHECK(mp::SimulateStep(mp::BuildSchedule(ScheduleKind::kGPipe, 1, 4), {t}, {}, {memory})
            .device_peak_memory_bytes[0] == 100 + 40);
}

TEST_CASE("zbv: with T_F = T_I = T_W the bubble is the fill's K - 1 chunk slots, half of zb-h1's") {
  mp::StageTimes chunk;  // half a device's work: F, I and W one slot each
  chunk.forward_ms = chunk.input_backward_ms = chunk.weight_backward_ms = 1;
  chunk.backward_ms = 2;
  mp::StageTimes stage;  // the same work as one stage per device
  stage.forward_ms = stage.input_backward_ms = stage.weight_backward_ms = 2;
  for (int k = 2; k <= 8; ++k) {
    for (int m : {k, k + 1, 2 * k, 3 * k, 4 * k}) {
      CAPTURE(k);
      CAPTURE(m);
      const auto v = mp::SimulateStep(mp::BuildSchedule(ScheduleKind::kZeroBubbleV, k, m, 2),
                                      std::vector<mp::StageTimes>(2 * k, chunk));
      const auto zb = mp::SimulateStep(mp::BuildSchedule(ScheduleKind::kZeroBubbleH1, k, m),
                                       std::vector<mp::StageTimes>(k, stage));
      const double work = 6.0 * m;
      for (int d = 0; d < k; ++d) CHECK(v.device_busy_ms[d] == Approx(work));
      if (k <= 4) {
        CHECK(v.step_ms == Approx(work + k - 1));  // exactly the fill
      } else if (m >= 2 * k) {
        CHECK(v.step_ms <= 1.03 * (work + k - 1));
      }
      CHECK(zb.step_ms == Approx(work + 2 * (k - 1)));
      CHECK(v.step_ms < zb.step_ms);
    }
  }
}

TEST_CASE("dualpipev: with T_F = T_I = T_W its bubble is the fill's K - 1 chunk slots, within its paper's bound") {
  // DualPipe's paper: (PP/2 - 1)(F&B + B - 3W) at PP/2 = K devices, F&B
  // the time of an F beside a B; run one after the other, F + B. Here an
  // F may start while the B beside it waits, and the fill is all there is.
  mp::StageTimes chunk;
  chunk.forward_ms = chunk.input_backward_ms = chunk.weight_backward_ms = 1;
  chunk.backward_ms = 2;
  const double f = 1, b = 2, w = 1;
  for (int k = 2; k <= 8; ++k) {
    for (int m : {2 * k, 2 * k + 1, 3 * k, 8 * k}) {
      CAPTURE(k);
      CAPTURE(m);
      const auto v = mp::SimulateStep(mp::BuildSchedule(ScheduleKind::kDualPipeV, k, m, 2),
                                      std::vector<mp::StageTimes>(2 * k, chunk));
      const double work = 6.0 * m;
      for (int d = 0; d < k; ++d) CHECK(v.device_busy_ms[d] == Approx(work));
      CHECK(v.step_ms <= work + (k - 1) * ((f + b) + b - 3 * w) + 1e-9);
      CHECK(v.step_ms == Approx(work + k - 1));
    }
  }
}

TEST_CASE("the schedules drawn in schedule.cpp, slot by slot") {
  const std::vector<mp::StageTimes> unit(3, {1, 1});
  auto gpipe = mp::SimulateStep(mp::BuildSchedule(ScheduleKind::kGPipe, 3, 4), unit);
  CHECK(Starts(gpipe, 0) == "F0@0 F1@1 F2@2 F3@3 B0@8 B1@9 B2@10 B3@11");
  CHECK(Starts(gpipe, 1) == "F0@1 F1@2 F2@3 F3@4 B0@7 B1@8 B2@9 B3@10");
  CHECK(Starts(gpipe, 2) == "F0@2 F1@3 F2@4 F3@5 B0@6 B1@7 B2@8 B3@9");
  auto onef = mp::SimulateStep(mp::BuildSchedule(ScheduleKind::kOneFOneB, 3, 4), unit);
  CHECK(Starts(onef, 0) == "F0@0 F1@1 F2@2 B0@5 F3@6 B1@7 B2@9 B3@11");
  CHECK(Starts(onef, 1) == "F0@1 F1@2 B0@4 F2@5 B1@6 F3@7 B2@8 B3@10");
  CHECK(Starts(onef, 2) == "F0@2 B0@3 F1@4 B1@5 F2@6 B2@7 F3@8 B3@9");
  CHECK(onef.step_ms == Approx(12));
  mp::StageTimes third;  // F, I and W one slot each
  third.forward_ms = third.input_backward_ms = third.weight_backward_ms = 1;
  auto zb = mp::SimulateStep(mp::BuildSchedule(ScheduleKind::kZeroBubbleH1, 3, 4), {third, third, third});
  CHECK(Starts(zb, 0) == "F0@0 F1@1 F2@2 I0@5 W0@6 F3@7 I1@8 W1@9 I2@10 W2@11 I3@12 W3@13");
  CHECK(Starts(zb, 1) == "F0@1 F1@2 I0@4 F2@5 I1@6 W0@7 F3@8 I2@9 W1@10 I3@11 W2@12 W3@13");
  CHECK(Starts(zb, 2) == "F0@2 I0@3 F1@4 I1@5 F2@6 I2@7 W0@8 F3@9 I3@10 W1@11 W2@12 W3@13");
  CHECK(zb.step_ms == Approx(14));
  const std::vector<mp::StageTimes> half(4, {0.5, 0.5});  // a stage's chunk: half of a unit stage
  auto looped = mp::SimulateStep(mp::BuildSchedule(ScheduleKind::kInterleaved1F1B, 2, 4, 2), half);
  CHECK(looped.step_ms == Approx(9));
  mp::StageTimes chunk;
  chunk.forward_ms = chunk.input_backward_ms = chunk.weight_backward_ms = 1;
  auto v = mp::SimulateStep(mp::BuildSchedule(ScheduleKind::kZeroBubbleV, 2, 2, 2), std::vector<mp::StageTimes>(4, chunk));
  CHECK(Starts(v, 0) == "F0@0 F1@1 F0@3 I0@4 F1@5 I1@6 I0@7 W0@8 I1@9 W0@10 W1@11 W1@12");
  CHECK(Starts(v, 1) == "F0@1 F0@2 F1@3 F1@4 I0@5 I0@6 I1@7 I1@8 W0@9 W0@10 W1@11 W1@12");
  CHECK(v.step_ms == Approx(13));
  auto fwd = mp::SimulateStep(mp::BuildSchedule(ScheduleKind::kForwardOnly, 3, 4), unit);
  CHECK(Starts(fwd, 2) == "F0@2 F1@3 F2@4 F3@5");
}

TEST_CASE("gpipe, 2 stages, unequal times and transfers, timed by hand") {
  // s0: F 1, B 2; s1: F 2, B 3; activations 0.5 ms, gradients 0.25 ms.
  auto r = mp::SimulateStep(mp::BuildSchedule(ScheduleKind::kGPipe, 2, 2), {{1, 2}, {2, 3}}, {{0.5, 0.25}},
                            {{100, 10}, {50, 20}});
  CHECK(Span(r, 0, "0SEND_F0") == std::pair{1.0, 1.5});
  CHECK(Span(r, 0, "0SEND_F1") == std::pair{2.0, 2.5});
  CHECK(Span(r, 1, "1RECV_F0") == std::pair{0.0, 1.5});
  CHECK(Span(r, 1, "1F1") == std::pair{3.5, 5.5});
  CHECK(Span(r, 1, "1B0") == std::pair{5.5, 8.5});
  CHECK(Span(r, 1, "1SEND_B0") == std::pair{8.5, 8.75});
  CHECK(Span(r, 0, "0B0") == std::pair{8.75, 10.75});
  CHECK(Span(r, 0, "0B1") == std::pair{11.75, 13.75});
  CHECK(r.step_ms == Approx(13.75));
  CHECK(r.busy_ms[0] == Approx(6));
  CHECK(r.busy_ms[1] == Approx(10));
  CHECK(r.idle_ms[0] == Approx(7.75));
  CHECK(r.bubble_fraction == Approx(11.5 / 27.5));
  CHECK(r.peak_memory_bytes[0] == 100 + 2 * 10);
  CHECK(r.peak_memory_bytes[1] == 50 + 2 * 20);
}

TEST_CASE("1f1b, 2 stages, slow last stage and 1 ms links, timed by hand") {
  auto r = mp::SimulateStep(mp::BuildSchedule(ScheduleKind::kOneFOneB, 2, 3), {{1, 1}, {2, 2}}, {{1, 1}},
                            {{0, 10}, {0, 10}});
  CHECK(Starts(r, 0) == "F0@0 F1@1 B0@7 F2@8 B1@11 B2@15");
  CHECK(Starts(r, 1) == "F0@2 B0@4 F1@6 B1@8 F2@10 B2@12");
  CHECK(Span(r, 1, "1RECV_F1") == std::pair{6.0, 6.0});  // arrived at 3, long before it was needed
  CHECK(Span(r, 0, "0RECV_B2") == std::pair{12.0, 15.0});
  CHECK(r.step_ms == Approx(16));
  CHECK(r.bubble_fraction == Approx(14.0 / 32));
  CHECK(r.max_in_flight == std::vector<int>{2, 1});
  CHECK(r.peak_memory_bytes == std::vector<int64_t>{20, 10});
  CHECK(r.device_peak_memory_bytes == std::vector<int64_t>{20, 10});
}

TEST_CASE("a device's memory sums its stages: static always, activations while held") {
  // 2 devices, 2 stages each; stage s holds 100 + s bytes static, 10 per micro-batch.
  const auto sch = mp::BuildSchedule(ScheduleKind::kInterleaved1F1B, 2, 2, 2);
  std::vector<mp::StageMemory> memory;
  for (int s = 0; s < 4; ++s) memory.push_back({100 + s, 10});
  const auto r = mp::SimulateStep(sch, std::vector<mp::StageTimes>(4, {1, 1}), {}, memory);
  // Device 0 (stages 0 and 2) runs 0F0 0F1 2F0 2F1 before its first backward: 4 micro-batches held.
  CHECK(r.max_in_flight == std::vector<int>{2, 2, 2, 1});
  CHECK(r.device_peak_memory_bytes[0] == 100 + 102 + 4 * 10);
  CHECK(r.device_peak_memory_bytes[1] == 101 + 103 + 3 * 10);
  // An op's working memory counts once per stage, and a device adds its
  // stages' largest: one action runs at a time.
  for (int s = 0; s < 4; ++s) memory[s].transient_bytes = 1000 * (s + 1);
  const auto t = mp::SimulateStep(sch, std::vector<mp::StageTimes>(4, {1, 1}), {}, memory);
  CHECK(t.peak_memory_bytes[2] == 102 + 2 * 10 + 3000);
  CHECK(t.device_peak_memory_bytes[0] == 100 + 102 + 4 * 10 + 3000);
  CHECK(t.device_peak_memory_bytes[1] == 101 + 103 + 3 * 10 + 4000);
}

TEST_CASE("a device's memory moment by moment: the forward's peak, what I frees, a boundary on one device once") {
  // StageMemory: static, activation, transient, weight_gradient, gradient, received, forward_peak, freed_by_i.
  // The forward's peak comes on top of what is held: GPipe's second forward of 50 live over the first's 10 kept.
  const auto gpipe = mp::BuildSchedule(ScheduleKind::kGPipe, 1, 2);
  CHECK(mp::SimulateStep(gpipe, {{1, 1}}, {}, {{0, 10, 0, 0, 0, 0, 50}}).device_peak_memory_bytes[0] == 60);
  CHECK(mp::SimulateStep(gpipe, {{1, 1}}, {}, {{0, 10}}).device_peak_memory_bytes[0] == 20);
  // zb-h1's last stage (1F0 1I0 1F1 1I1 1W0 ...): I frees 6 of a micro-batch's 10 and keeps 2 for W, so
  // two micro-batches are 10 + 6, not 2 x (10 + 2).
  const auto zb = mp::BuildSchedule(ScheduleKind::kZeroBubbleH1, 2, 4);
  const std::vector<mp::StageTimes> split(2, {1, 2, 1, 1});
  CHECK(mp::SimulateStep(zb, split, {}, {{0, 10}, {0, 10, 0, 2, 0, 0, 0, 6}}).device_peak_memory_bytes[1] == 16);
  CHECK(mp::SimulateStep(zb, split, {}, {{0, 10}, {0, 10, 0, 2}}).device_peak_memory_bytes[1] == 24);
  // zbv's middle device runs stages 1 and 2: what stage 2 receives is the tensor stage 1 holds, held once.
  const auto v = mp::BuildSchedule(ScheduleKind::kZeroBubbleV, 2, 1, 2);
  const std::vector<mp::StageTimes> four(4, {1, 2, 1, 1});
  std::vector<mp::StageMemory> memory(4, mp::StageMemory{0, 10});
  for (int s = 1; s < 4; ++s) memory[s].received_bytes = 4;
  CHECK(mp::SimulateStep(v, four, {}, memory).device_peak_memory_bytes[1] == 10 + 6);
  CHECK(mp::SimulateStep(v, four, {}, std::vector<mp::StageMemory>(4, {0, 10})).device_peak_memory_bytes[1] == 20);
}

// I holds what its backward needs beside the activations, W only one
// node's weight gradients; a stage's first W makes every gradient before
// letting go of what I kept (GPT's 4-stage zb-h1 last device, measured:
// the gradients' 2 MiB on top of what it held before W).
TEST_CASE("zb-h1: I and W each hold their own transient, and the first W its stage's gradients") {
  const auto zb = mp::BuildSchedule(ScheduleKind::kZeroBubbleH1, 1, 1);  // 0F0 0I0 0W0
  REQUIRE(zb.actions[0].size() == 3);
  const std::vector<mp::StageTimes> split(1, {1, 2, 1, 1});
  mp::StageMemory memory{0, 10};
  memory.transient_bytes = 1;
  memory.weight_transient_bytes = 30;
  CHECK(mp::SimulateStep(zb, split, {}, {memory}).device_peak_memory_bytes[0] == 10 + 30);
  memory.transient_bytes = 100;
  CHECK(mp::SimulateStep(zb, split, {}, {memory}).device_peak_memory_bytes[0] == 10 + 100);
  memory.transient_bytes = 1;
  memory.static_bytes = memory.gradient_bytes = 40;  // made by the first W, on top of its 10
  CHECK(mp::SimulateStep(zb, split, {}, {memory}).device_peak_memory_bytes[0] == 10 + 40);
  memory.weight_transient_bytes = 50;  // a W that needs more than the gradients
  CHECK(mp::SimulateStep(zb, split, {}, {memory}).device_peak_memory_bytes[0] == 10 + 50);
}

TEST_CASE("3 stages, gpipe, a busy link delays the second transfer") {
  // Transfers (2 ms) are slower than stage 0's forward (1 ms): the link
  // queues them, so stage 1 receives micro-batch m at 3 + 2m.
  auto r = mp::SimulateStep(mp::BuildSchedule(ScheduleKind::kForwardOnly, 3, 3), {{1, 0}, {1, 0}, {1, 0}},
                            {{2, 0}, {0, 0}});
  CHECK(Span(r, 0, "0SEND_F1") == std::pair{3.0, 5.0});
  CHECK(Span(r, 0, "0SEND_F2") == std::pair{5.0, 7.0});
  CHECK(Starts(r, 1) == "F0@3 F1@5 F2@7");
  CHECK(Starts(r, 2) == "F0@4 F1@6 F2@8");
  CHECK(r.step_ms == Approx(9));
  CHECK(r.max_in_flight == std::vector<int>{1, 1, 1});
}

TEST_CASE("SimulateStep rejects mismatched inputs and deadlocks") {
  auto s = mp::BuildSchedule(ScheduleKind::kGPipe, 2, 2);
  CHECK_THROWS_WITH_AS(mp::SimulateStep(s, {{1, 1}}), doctest::Contains("1 stage times"), mp::InputError);
  CHECK_THROWS_WITH_AS(mp::SimulateStep(s, {{1, 1}, {1, 1}}, {{1, 1}, {1, 1}}),
                       doctest::Contains("2 transfer times for 1 boundaries"), mp::InputError);
  s.actions[0] = mp::ParseActions("0F0 0F1 0RECV_B0 0SEND_F0 0SEND_F1 0B0 0RECV_B1 0B1");
  CHECK_THROWS_WITH_AS(mp::SimulateStep(s, {{1, 1}, {1, 1}}), doctest::Contains("deadlocks on device 0 at action 0RECV_B0"),
                       mp::InputError);
}

TEST_CASE("replicas: a stage's all-reduce starts after its last action and can end the step") {
  const mp::Schedule sch = mp::BuildSchedule(ScheduleKind::kOneFOneB, 2, 4);
  const std::vector<mp::StageTimes> times = {{1, 2}, {1, 2}};
  const mp::SimResult plain = mp::SimulateStep(sch, times);
  // 1F1B: stage 0 runs the last backward, so its all-reduce ends the step;
  // stage 1's, as long, is hidden behind it.
  const mp::SimResult reduced = mp::SimulateStep(sch, times, {}, {}, {5, 5});
  CHECK(reduced.step_ms == doctest::Approx(plain.step_ms + 5));
  CHECK(reduced.allreduce_ms == std::vector<double>{5, 5});
  CHECK(reduced.busy_ms == plain.busy_ms);
  CHECK(reduced.idle_ms[0] == doctest::Approx(plain.idle_ms[0] + 5));
  // Stage 1 is done 2 ms before stage 0: an all-reduce of 1 ms there is free.
  CHECK(mp::SimulateStep(sch, times, {}, {}, {0, 1}).step_ms == doctest::Approx(plain.step_ms));
  CHECK_THROWS_AS(mp::SimulateStep(sch, times, {}, {}, {1}), mp::InputError);
}

TEST_CASE("the optimizer's step: each device its stages' after its list and all-reduces, work and not bubble") {
  // zbv on 2 devices: device 0 holds stages 0 and 3, device 1 stages 1 and 2.
  const mp::Schedule sch = mp::BuildSchedule(ScheduleKind::kZeroBubbleV, 2, 4, 2);
  const std::vector<mp::StageTimes> times(4, {1, 2, 1, 1});
  const mp::SimResult plain = mp::SimulateStep(sch, times);
  double done[2] = {0, 0};
  for (int d = 0; d < 2; ++d) {
    for (const auto& t : plain.timeline[d]) done[d] = std::max(done[d], t.end_ms);
  }
  const std::vector<double> optimizer = {1, 2, 0.5, 3};  // per stage
  const mp::SimResult stepped = mp::SimulateStep(sch, times, {}, {}, {}, {}, 0, optimizer);
  CHECK(stepped.optimizer_ms == std::vector<double>{4, 2.5});  // stages 0 + 3; 1 + 2
  CHECK(stepped.step_ms == doctest::Approx(std::max(done[0] + 4, done[1] + 2.5)));
  CHECK(stepped.device_busy_ms == plain.device_busy_ms);
  for (int d = 0; d < 2; ++d) {
    CHECK(stepped.idle_ms[d] == doctest::Approx(stepped.step_ms - plain.device_busy_ms[d] - stepped.optimizer_ms[d]));
  }
  // After the all-reduces, with replicas.
  const std::vector<double> allreduce = {1, 1, 1, 1};
  const mp::SimResult both = mp::SimulateStep(sch, times, {}, {}, allreduce, {}, 0, optimizer);
  CHECK(both.step_ms == doctest::Approx(std::max(done[0] + 2 + 4, done[1] + 2 + 2.5)));
  CHECK(plain.optimizer_ms == std::vector<double>{0, 0});
  CHECK_THROWS_WITH_AS(mp::SimulateStep(sch, times, {}, {}, {}, {}, 0, {1, 2}),
                       doctest::Contains("2 optimizer times for 4 stages"), mp::InputError);
  CHECK_THROWS_WITH_AS(mp::SimulateStep(sch, times, {}, {}, {}, {}, 0, {1, 2, -1, 0}),
                       doctest::Contains("optimizer step -1 ms"), mp::InputError);
}

TEST_CASE("replicas wait for the latest of them: a share of the step, idle on every device, before the overhead") {
  const mp::Schedule sch = mp::BuildSchedule(ScheduleKind::kOneFOneB, 2, 4);
  const std::vector<mp::StageTimes> times = {{1, 2}, {1, 2}};
  const std::vector<double> allreduce = {0.5, 0.5}, optimizer = {0.25, 0.25};
  const mp::SimResult alone = mp::SimulateStep(sch, times, {}, {}, allreduce, {}, 0.5, optimizer);
  const mp::SimResult waiting = mp::SimulateStep(sch, times, {}, {}, allreduce, {}, 0.5, optimizer, 0.1);
  const double before_overhead = alone.step_ms - 0.5;
  CHECK(waiting.replica_wait_ms == doctest::Approx(0.1 * before_overhead));
  CHECK(waiting.step_ms == doctest::Approx(alone.step_ms + 0.1 * before_overhead));
  CHECK(waiting.device_busy_ms == alone.device_busy_ms);
  for (int d = 0; d < 2; ++d) CHECK(waiting.idle_ms[d] == doctest::Approx(alone.idle_ms[d] + waiting.replica_wait_ms));
  CHECK(alone.replica_wait_ms == 0);
  CHECK_THROWS_WITH_AS(mp::SimulateStep(sch, times, {}, {}, allreduce, {}, 0, optimizer, -0.1),
                       doctest::Contains("replicas' wait -0.1 of the step"), mp::InputError);
}

TEST_CASE("replicas: a device's stages all-reduce one after another once its whole list is done") {
  // zbv: device 0 holds stages 0 and 3, device 1 stages 1 and 2; mpexec
  // all-reduces a rank's stages in turn after its workers end.
  const mp::Schedule sch = mp::BuildSchedule(ScheduleKind::kZeroBubbleV, 2, 4, 2);
  const std::vector<mp::StageTimes> times(4, {1, 2, 1, 1});
  const mp::SimResult plain = mp::SimulateStep(sch, times);
  double device0_done = 0, device1_done = 0;
  for (const auto& t : plain.timeline[0]) device0_done = std::max(device0_done, t.end_ms);
  for (const auto& t : plain.timeline[1]) device1_done = std::max(device1_done, t.end_ms);
  CHECK(plain.step_ms == doctest::Approx(std::max(device0_done, device1_done)));
  // Stage 3 ends before device 0's list does; its all-reduce still waits
  // for the list, and then for stage 0's.
  const mp::SimResult reduced = mp::SimulateStep(sch, times, {}, {}, {2, 0.5, 0.5, 3});
  CHECK(reduced.step_ms == doctest::Approx(std::max(device0_done + 5, device1_done + 1)));
}

TEST_CASE("the runtime's fixed cost per step lengthens the step, every device idle for it") {
  const mp::Schedule sch = mp::BuildSchedule(ScheduleKind::kOneFOneB, 2, 4);
  const std::vector<mp::StageTimes> times = {{1, 2}, {1, 2}};
  const mp::SimResult plain = mp::SimulateStep(sch, times);
  const mp::SimResult paid = mp::SimulateStep(sch, times, {}, {}, {}, {1, 1.25}, 0.5);
  const mp::SimResult slowed = mp::SimulateStep(sch, times, {}, {}, {}, {1, 1.25});
  CHECK(paid.step_ms == doctest::Approx(slowed.step_ms + 0.5));
  CHECK(paid.busy_ms == slowed.busy_ms);  // the actions and their contention are unchanged
  for (int d = 0; d < 2; ++d) CHECK(paid.idle_ms[d] == doctest::Approx(slowed.idle_ms[d] + 0.5));
  CHECK(paid.bubble_fraction ==
        doctest::Approx((paid.idle_ms[0] + paid.idle_ms[1]) / (2 * paid.step_ms)));
  CHECK(mp::SimulateStep(sch, times, {}, {}, {}, {}, 0).step_ms == doctest::Approx(plain.step_ms));
  CHECK_THROWS_WITH_AS(mp::SimulateStep(sch, times, {}, {}, {}, {}, -1), doctest::Contains("step overhead -1"),
                       mp::InputError);
}

TEST_CASE("CPU workers: an action is slowed only while another stage computes, timed by hand") {
  // Forward-only, 2 stages, 2 micro-batches of 1 ms, 2x slower while both
  // compute: 0F0 runs alone [0, 1]; 0F1 and 1F0 overlap all along [1, 3];
  // 1F1 runs alone [3, 4].
  const mp::Schedule sch = mp::BuildSchedule(ScheduleKind::kForwardOnly, 2, 2);
  const std::vector<mp::StageTimes> times = {{1, 0}, {1, 0}};
  const mp::SimResult slowed = mp::SimulateStep(sch, times, {}, {}, {}, {1, 2});
  CHECK(slowed.step_ms == Approx(4));
  CHECK(Span(slowed, 0, "0F0") == std::make_pair(0.0, 1.0));
  CHECK(Span(slowed, 0, "0F1").second == Approx(3));
  CHECK(Span(slowed, 1, "1F0").second == Approx(3));
  CHECK(Span(slowed, 1, "1F1") == std::make_pair(3.0, 4.0));
  CHECK(slowed.busy_ms == std::vector<double>{3, 3});
  // One micro-batch never overlaps: nothing to pay.
  const mp::Schedule one = mp::BuildSchedule(ScheduleKind::kOneFOneB, 2, 1);
  CHECK(mp::SimulateStep(one, {{1, 2}, {3, 4}}, {}, {}, {}, {1, 2}).step_ms == Approx(10));
  // A full pipeline pays nearly the whole factor; factors of 1 change nothing.
  const mp::Schedule full = mp::BuildSchedule(ScheduleKind::kOneFOneB, 2, 32);
  const double alone = mp::SimulateStep(full, {{1, 2}, {1, 2}}).step_ms;
  const double shared = mp::SimulateStep(full, {{1, 2}, {1, 2}}, {}, {}, {}, {1, 1.5}).step_ms;
  CHECK(shared > 1.45 * alone);
  CHECK(shared < 1.5 * alone);
  CHECK(mp::SimulateStep(full, {{1, 2}, {1, 2}}, {}, {}, {}, {1, 1}).step_ms == Approx(alone));
  CHECK_THROWS_WITH_AS(mp::SimulateStep(full, {{1, 2}, {1, 2}}, {}, {}, {}, {1, 0.5}),
                       doctest::Contains("slowdown factor 0.5"), mp::InputError);
}

TEST_CASE("CPU workers: replicas running alongside slow even a lone stage") {
  // One stage, two replicas: the other replica's stage always computes too.
  const mp::Schedule sch = mp::BuildSchedule(ScheduleKind::kGPipe, 1, 2);
  const mp::SimResult r = mp::SimulateStep(sch, {{1, 2}}, {}, {}, {}, {1.5});
  CHECK(r.step_ms == Approx(1.5 * 6));
}

// A gradient sent to another device stays with its sender until the
// receiver's RECV_B takes it (the ConvNet's 4-stage zb-h1, device 1: two
// micro-batches' 100 KiB gradients over the plan while device 0 ran its
// forwards). 1F1B, 2 stages, 3 micro-batches: device 0 runs F0 F1 B0 ...,
// device 1 F0 B0 F1 .... Stage 0's forward takes 4, the rest 1.
TEST_CASE("a sent gradient is held by its sender until the receiver takes it") {
  const auto sch = mp::BuildSchedule(ScheduleKind::kOneFOneB, 2, 3);
  const std::vector<mp::StageTimes> times = {{4, 1}, {1, 1}};
  std::vector<mp::StageMemory> memory(2, mp::StageMemory{0, 10});
  memory[1].sent_gradient_bytes = 4;
  // Gradients back in 3: stage 1's B0 ends at 6, device 0 takes them at 9,
  // after stage 1's F1 has started at 8 (its activations arrive when device
  // 0's F1 ends): F1's 10 on top of B0's 4.
  const mp::SimResult late = mp::SimulateStep(sch, times, {{0, 3}}, memory);
  CHECK(late.device_peak_memory_bytes[1] == 14);
  // Gradients back at once: taken at 8, when device 0 is done with F1,
  // before stage 1 starts its F1.
  const mp::SimResult at_once = mp::SimulateStep(sch, times, {{0, 0}}, memory);
  CHECK(at_once.device_peak_memory_bytes[1] == 10);
  // Taken by the same device (zbv's middle stages) they are never held twice.
  const auto v = mp::BuildSchedule(ScheduleKind::kZeroBubbleV, 2, 1, 2);
  std::vector<mp::StageMemory> four(4, mp::StageMemory{0, 10});
  const std::vector<mp::StageTimes> split(4, {1, 2, 1, 1});
  const int64_t before = mp::SimulateStep(v, split, {}, four).device_peak_memory_bytes[1];
  four[2].sent_gradient_bytes = 4;
  CHECK(mp::SimulateStep(v, split, {}, four).device_peak_memory_bytes[1] == before);
}
