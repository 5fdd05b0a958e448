// Schedule generation in torch.distributed.pipelining's action grammar, one
// builder per kind, each drawn below with F, B, I and W one slot each
// (columns are slots, `.` idle; F0 is micro-batch 0's forward on that row's
// stage). The tests replay these drawings and check each kind's bubble
// against its paper's formula.
//
// gpipe (Huang et al., NeurIPS 2019: fill-drain), K = 3, M = 4: every
// forward, then every backward; 2(M + K - 1) slots, M micro-batches held.
//            s0   F0 F1 F2 F3  .  .  .  . B0 B1 B2 B3
//            s1    . F0 F1 F2 F3  .  . B0 B1 B2 B3  .
//            s2    .  . F0 F1 F2 F3 B0 B1 B2 B3  .  .
//
// 1f1b (PipeDream-flush, Narayanan et al., ICML 2021), K = 3, M = 4: stage
// s runs K - s - 1 warm-up forwards, then alternates F and B, then cools
// down; the same 2(M + K - 1) slots, at most K - s micro-batches held.
//            s0   F0 F1 F2  .  . B0 F3 B1  . B2  . B3
//            s1    . F0 F1  . B0 F2 B1 F3 B2  . B3  .
//            s2    .  . F0 B0 F1 B1 F2 B2 F3 B3  .  .
//
// interleaved-1f1b (Megatron-LM, Narayanan et al., SC 2021), K = 2 devices,
// v = 2 stages each (device d holds stages d and d + K: chunk c of device d
// is stage cK + d), M = 4: forwards go round the chunks in groups of K
// micro-batches; device d warms up with 2(K - d - 1) + (v - 1)K forwards,
// then alternates, and backwards visit the chunks in reverse. Each action is
// a chunk, 1/v of a stage's work, so the bubble is (K - 1)/(v M) of the
// work where 1f1b's is (K - 1)/M. M must be a multiple of K. The order
// (stage and micro-batch; the test replays it):
//            d0   0F0 0F1 2F0 2F1 0F2 2B0 0F3 2B1 2F2 0B0 2F3 0B1 2B2 2B3 0B2 0B3
//            d1   1F0 1F1 3F0 3B0 3F1 3B1 1F2 1B0 1F3 1B1 3F2 3B2 3F3 3B3 1B2 1B3
//
// zb-h1 (ZB-H1, Qi et al., ICLR 2024), K = 3, M = 4: 1f1b's order with each
// backward split into I (the input gradients, sent upstream at once) and W
// (the weight gradients, which nothing waits for). Stage s defers its W by
// s I's: the later stages, whose I the earlier ones wait for, run I as soon
// as they can, and their W fill the cool-down where 1f1b idles. With
// T_F = T_I = T_W the bubble is K - 1 slots against 1f1b's 3(K - 1), and no
// stage holds more than K micro-batches (from F to W), 1f1b's peak.
//            s0   F0 F1 F2  .  . I0 W0 F3 I1 W1 I2 W2 I3 W3
//            s1    . F0 F1  . I0 F2 I1 W0 F3 I2 W1 I3 W2 W3
//            s2    .  . F0 I0 F1 I1 F2 I2 W0 F3 I3 W1 W2 W3
//
// zbv (ZB-V: the V-shaped zero-bubble schedule of Qi et al., 2024;
// torch.distributed.pipelining's ScheduleZBVZeroBubble), K = 2 devices,
// 2K = 4 stages in a V: device d holds stages d and 2K - 1 - d, so a
// micro-batch goes down the devices on the first chunks and back up on the
// second, and the last stage sits on device 0 beside the first. Each chunk
// is half a device's work. The order comes from a replay in unit slots (a
// chunk's F, I and W one slot each, transfers free) where every device
// starts, of what is ready on its two stages: an I, oldest micro-batch
// first (the gradients others wait for); else an F, the second chunk's
// first (it leads to the loss), while the device holds fewer than 2K
// chunks' activations (1f1b's peak: K micro-batches of the whole device);
// else a W, oldest first. For M >= K (K <= 4; within 3% for larger K at
// M >= 2K) that takes 6M + K - 1 slots, the K - 1 of the fill only: a
// bubble of (K - 1)/(6M + K - 1), half of zb-h1's with the same work.
// K = 2, M = 2:
//            d0   0F0 0F1  .  3F0 3I0 3F1 3I1 0I0 0W0 0I1 3W0 0W1 3W1
//            d1    .  1F0 2F0 1F1 2F1 2I0 1I0 2I1 1I1 1W0 2W0 1W1 2W1
//
// dualpipev (DualPipeV: DeepSeek-V3's DualPipe folded into a V, 2024;
// torch.distributed.pipelining's ScheduleDualPipeV), K devices with zbv's V
// placement (chunk 0 of device d is stage d, chunk 1 stage 2K - 1 - d), M
// >= 2K. Device d runs eight phases, m the next micro-batch of each
// (action, chunk); I queues its W, and W runs the oldest queued:
//   1. 2(K - d - 1) x  F0                   fill the V's first arm
//   2. d + 1        x  F0 F1
//   3. K - d - 1    x  I1 W F1               zero bubble on the second arm
//   4. M - 2K + d + 1 x F0 B1 F1 B0          the steady state: each F beside
//                                            a B of the other chunk, which
//                                            DualPipe overlaps (here, one
//                                            after the other)
//   5. K - d - 1    x  B1 F1 B0
//   6. d + 1        x  B1 B0                 from the middle on, I for B
//                                            (before B1 on odd devices)
//   7. K - d - 1    x  W I0
//   8. d + 1        x  W                     what the queue holds
// With overlap its bubble is (K - 1)(F&B + B - 3W) (DualPipe's paper, at
// PP/2 = K devices); run one after the other here, F&B = F + B. K = 2, M =
// 4, stage and micro-batch (d0 holds stages 0 and 3, d1 stages 1 and 2):
//            d0   0F0 0F1 0F2 3F0 3I0 3W0 3F1 0F3 3B1 3F2 0B0 3B2 3F3 0B1 3B3 0I2 0W2 0I3 0W3
//            d1   1F0 2F0 1F1 2F1 1F2 2B0 2F2 1B0 1F3 2B1 2F3 1B1 2B2 1B2 2I3 1I3 2W3 1W3
//
// forward (inference), K = 3, M = 4: every forward, in order.
#include "planner/schedule/schedule.h"

#include <algorithm>
#include <climits>
#include <deque>

#include "common/error.h"

namespace mp {
namespace {

// The builders below hand each compute action to `emit(kind, chunk,
// microbatch)`, a template parameter (through std::function, the calls
// were a twentieth of a 10,000-node chain's search).
template <typename Emit>
void FillDrain(int microbatches, bool backward, const Emit& emit) {
  for (int m = 0; m < microbatches; ++m) emit(ActionKind::kForward, 0, m);
  if (!backward) return;
  for (int m = 0; m < microbatches; ++m) emit(ActionKind::kBackward, 0, m);
}

// 1f1b on device d, its backward B, or I with W deferred by `defer_w` I's.
template <typename Emit>
void OneFOneB(int devices, int microbatches, int d, bool split, int defer_w, const Emit& emit) {
  std::deque<int> weights;  // I done, W not yet
  auto backward = [&](int m) {
    if (!split) return emit(ActionKind::kBackward, 0, m);
    emit(ActionKind::kBackwardInput, 0, m);
    weights.push_back(m);
    while (int(weights.size()) > defer_w) emit(ActionKind::kBackwardWeight, 0, weights.front()), weights.pop_front();
  };
  const int warmup = std::min(devices - d - 1, microbatches);
  for (int m = 0; m < warmup; ++m) emit(ActionKind::kForward, 0, m);
  for (int m = warmup; m < microbatches; ++m) {
    emit(ActionKind::kForward, 0, m);
    backward(m - warmup);
  }
  for (int m = microbatches - warmup; m < microbatches; ++m) backward(m);
  for (int m : weights) emit(ActionKind::kBackwardWeight, 0, m);
}

// Megatron-LM's interleaved order on device d: the k-th forward is chunk
// (k mod Kv) / K of micro-batch (k / Kv) K + k mod K; backwards the same
// with the chunks reversed.
template <typename Emit>
void Interleaved(int devices, int chunks, int microbatches, int d, const Emit& emit) {
  const int group = devices * chunks;
  const int total = chunks * microbatches;
  auto microbatch = [&](int k) { return (k / group) * devices + k % devices; };
  auto forward = [&](int k) { emit(ActionKind::kForward, (k % group) / devices, microbatch(k)); };
  auto backward = [&](int k) { emit(ActionKind::kBackward, chunks - 1 - (k % group) / devices, microbatch(k)); };
  const int warmup = std::min(2 * (devices - d - 1) + (chunks - 1) * devices, total);
  for (int k = 0; k < warmup; ++k) forward(k);
  for (int k = warmup; k < total; ++k) {
    forward(k);
    backward(k - warmup);
  }
  for (int k = total - warmup; k < total; ++k) backward(k);
}

// One compute action in a device's order: its chunk on that device.
struct Step {
  ActionKind kind;
  int chunk;
  int microbatch;
};

// zbv's per-device orders, from the unit-slot replay drawn above. Per
// stage, F, I and W each run in micro-batch order, so a counter per stage
// says which one is next. O((6M + K) K).
std::vector<std::vector<Step>> ZeroBubbleVOrder(int devices, int microbatches) {
  const int K = devices, S = 2 * K, M = microbatches;
  std::vector<int> f_end(size_t(S) * M, INT_MAX), i_end(size_t(S) * M, INT_MAX);  // the slot it ends
  std::vector<int> next_f(S, 0), next_i(S, 0), next_w(S, 0), held(K, 0);
  std::vector<std::vector<Step>> order(K);
  const auto at = [M](int s, int m) { return size_t(s) * M + m; };
  for (int t = 0, left = 3 * S * M; left > 0; ++t) {
    bool started = false;
    for (int d = 0; d < K; ++d) {
      const int stages[2] = {d, S - 1 - d};  // chunk 0, chunk 1
      const auto ready_i = [&](int s) {
        const int m = next_i[s];
        return m < M && f_end[at(s, m)] <= t && (s == S - 1 || i_end[at(s + 1, m)] <= t);
      };
      const auto ready_f = [&](int s) { return next_f[s] < M && (s == 0 || f_end[at(s - 1, next_f[s])] <= t); };
      const auto ready_w = [&](int s) { return next_w[s] < next_i[s] && i_end[at(s, next_w[s])] <= t; };
      int chunk = -1;
      ActionKind kind = ActionKind::kBackwardInput;
      if (ready_i(stages[0]) || ready_i(stages[1])) {
        const bool deep = ready_i(stages[1]) && (!ready_i(stages[0]) || next_i[stages[1]] <= next_i[stages[0]]);
        chunk = deep ? 1 : 0;
      } else if (held[d] < 2 * K && (ready_f(stages[1]) || ready_f(stages[0]))) {
        kind = ActionKind::kForward;
        chunk = ready_f(stages[1]) ? 1 : 0;
      } else if (ready_w(stages[0]) || ready_w(stages[1])) {
        kind = ActionKind::kBackwardWeight;
        chunk = ready_w(stages[0]) && (!ready_w(stages[1]) || next_w[stages[0]] <= next_w[stages[1]]) ? 0 : 1;
      }
      if (chunk < 0) continue;
      const int s = stages[chunk];
      int& next = kind == ActionKind::kForward ? next_f[s] : kind == ActionKind::kBackwardInput ? next_i[s] : next_w[s];
      order[d].push_back({kind, chunk, next});
      if (kind == ActionKind::kForward) {
        f_end[at(s, next)] = t + 1;
        ++held[d];
      } else if (kind == ActionKind::kBackwardInput) {
        i_end[at(s, next)] = t + 1;
      } else {
        --held[d];
      }
      ++next;
      --left;
      started = true;
    }
    if (!started) throw InternalError(Concat("zbv: no device can start at slot ", t, " (", K, " devices, ", M, " micro-batches)"));
  }
  return order;
}

// DualPipeV's eight phases on device d, drawn above.
template <typename Emit>
void DualPipeV(int devices, int microbatches, int d, const Emit& emit) {
  const int K = devices, M = microbatches;
  int next[2][3] = {};  // [chunk][F, B or I] -> its next micro-batch
  std::deque<std::pair<int, int>> weights;  // (chunk, micro-batch) whose W waits
  const auto forward = [&](int c) { emit(ActionKind::kForward, c, next[c][0]++); };
  const auto backward = [&](int c, bool zero_bubble) {
    const int m = next[c][1]++;
    emit(zero_bubble ? ActionKind::kBackwardInput : ActionKind::kBackward, c, m);
    if (zero_bubble) weights.emplace_back(c, m);
  };
  const auto weight = [&] {
    emit(ActionKind::kBackwardWeight, weights.front().first, weights.front().second);
    weights.pop_front();
  };
  for (int i = 0; i < 2 * (K - d - 1); ++i) forward(0);
  for (int i = 0; i < d + 1; ++i) forward(0), forward(1);
  for (int i = 0; i < K - d - 1; ++i) backward(1, true), weight(), forward(1);
  for (int i = 0; i < M - 2 * K + d + 1; ++i) forward(0), backward(1, false), forward(1), backward(0, false);
  for (int i = 0; i < K - d - 1; ++i) backward(1, false), forward(1), backward(0, false);
  const int middle = (d + 1) / 2;
  for (int i = 0; i < d + 1; ++i) {
    backward(1, i > middle || (i == middle && d % 2 == 1));
    backward(0, i >= middle);
  }
  for (int i = 0; i < K - d - 1; ++i) weight(), backward(0, true);
  while (!weights.empty()) weight();
}

}  // namespace

std::string ScheduleName(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kGPipe: return "gpipe";
    case ScheduleKind::kOneFOneB: return "1f1b";
    case ScheduleKind::kForwardOnly: return "forward";
    case ScheduleKind::kInterleaved1F1B: return "interleaved-1f1b";
    case ScheduleKind::kZeroBubbleH1: return "zb-h1";
    case ScheduleKind::kZeroBubbleV: return "zbv";
    case ScheduleKind::kDualPipeV: return "dualpipev";
  }
  throw InternalError("ScheduleName: unknown ScheduleKind");
}

ScheduleKind ParseScheduleKind(const std::string& text) {
  if (text == "gpipe" || text == "ScheduleGPipe") return ScheduleKind::kGPipe;
  if (text == "1f1b" || text == "Schedule1F1B") return ScheduleKind::kOneFOneB;
  if (text == "forward" || text == "forward_only" || text == "infer") return ScheduleKind::kForwardOnly;
  if (text == "interleaved-1f1b" || text == "ScheduleInterleaved1F1B") return ScheduleKind::kInterleaved1F1B;
  if (text == "zb-h1" || text == "ScheduleInterleavedZeroBubble") return ScheduleKind::kZeroBubbleH1;
  if (text == "zbv" || text == "ScheduleZBVZeroBubble") return ScheduleKind::kZeroBubbleV;
  if (text == "dualpipev" || text == "ScheduleDualPipeV") return ScheduleKind::kDualPipeV;
  throw InputError(Concat("schedule '", text, "': expected ", TrainingScheduleNames(), " or forward"));
}

std::string TrainingScheduleNames() { return "gpipe, 1f1b, interleaved-1f1b, zb-h1, zbv or dualpipev"; }

bool IsTraining(ScheduleKind kind) { return kind != ScheduleKind::kForwardOnly; }

bool SplitsBackward(ScheduleKind kind) {
  return kind == ScheduleKind::kZeroBubbleH1 || IsV(kind);
}

bool IsV(ScheduleKind kind) { return kind == ScheduleKind::kZeroBubbleV || kind == ScheduleKind::kDualPipeV; }

int ChunksFor(ScheduleKind kind, int requested) {
  if (kind == ScheduleKind::kInterleaved1F1B) return requested > 0 ? requested : 2;
  return IsV(kind) ? 2 : 1;
}

std::vector<int> StagePlacement(ScheduleKind kind, int devices, int chunks) {
  std::vector<int> device(size_t(std::max(devices * chunks, 0)));
  for (int s = 0; s < int(device.size()); ++s) {
    const bool back = IsV(kind) && s >= devices;  // the V's second arm
    device[s] = back ? 2 * devices - 1 - s : s % devices;
  }
  return device;
}

std::string ScheduleRuledOut(ScheduleKind kind, int devices, int microbatches, int chunks) {
  if (devices < 1) return Concat(devices, " devices; expected at least 1");
  if (microbatches < 1) return Concat(microbatches, " micro-batches; expected at least 1");
  if (kind == ScheduleKind::kInterleaved1F1B) {
    if (chunks < 2) return Concat("interleaved-1f1b needs at least 2 stages per device, not ", chunks);
    if (devices < 2) return "interleaved-1f1b needs at least 2 devices";
    if (microbatches % devices != 0) {
      return Concat("interleaved-1f1b needs M divisible by K (", microbatches, " micro-batches on ", devices,
                    " devices)");
    }
  } else if (IsV(kind)) {
    const std::string name = ScheduleName(kind);
    if (chunks != 2) return Concat(name, " runs 2 stages per device (a V), not ", chunks);
    if (devices < 2) return Concat(name, " needs at least 2 devices");
    if (kind == ScheduleKind::kDualPipeV && microbatches < 2 * devices) {
      return Concat("dualpipev needs M >= 2K (", microbatches, " micro-batches on ", devices, " devices)");
    }
  } else if (chunks != 1) {
    return Concat(ScheduleName(kind), " runs one stage per device, not ", chunks);
  }
  return "";
}

namespace {

// InputError naming the rule where `kind` cannot take these numbers.
void CheckRuledOut(ScheduleKind kind, int devices, int microbatches, int chunks) {
  if (std::string why = ScheduleRuledOut(kind, devices, microbatches, chunks); !why.empty()) {
    throw InputError(Concat("schedule: ", why));
  }
}

// Each device's compute actions in its list's order, as `each(device,
// kind, chunk, microbatch)`, for numbers the kind takes (CheckRuledOut).
template <typename Each>
void EachCompute(ScheduleKind kind, int devices, int microbatches, int chunks, const Each& each) {
  const std::vector<std::vector<Step>> zbv =
      kind == ScheduleKind::kZeroBubbleV ? ZeroBubbleVOrder(devices, microbatches) : std::vector<std::vector<Step>>{};
  for (int d = 0; d < devices; ++d) {
    const auto emit = [&](ActionKind k, int chunk, int m) { each(d, k, chunk, m); };
    switch (kind) {
      case ScheduleKind::kForwardOnly: FillDrain(microbatches, false, emit); break;
      case ScheduleKind::kGPipe: FillDrain(microbatches, true, emit); break;
      case ScheduleKind::kOneFOneB: OneFOneB(devices, microbatches, d, false, 0, emit); break;
      case ScheduleKind::kZeroBubbleH1: OneFOneB(devices, microbatches, d, true, d, emit); break;
      case ScheduleKind::kInterleaved1F1B: Interleaved(devices, chunks, microbatches, d, emit); break;
      case ScheduleKind::kZeroBubbleV:
        for (const Step& step : zbv[d]) emit(step.kind, step.chunk, step.microbatch);
        break;
      case ScheduleKind::kDualPipeV: DualPipeV(devices, microbatches, d, emit); break;
    }
  }
}

// [device] -> its stages, by chunk.
std::vector<std::vector<int>> DeviceStages(const std::vector<int>& placement, int devices) {
  std::vector<std::vector<int>> device_stages(devices);
  for (int s = 0; s < int(placement.size()); ++s) device_stages[placement[s]].push_back(s);
  return device_stages;
}

// Stage s's micro-batches held: one more at its F, one fewer at its B or W
// (inference: none after its F); the most at once in `peak`.
void CountHeld(ActionKind kind, bool training, int& held, int& peak) {
  if (kind == ActionKind::kForward) {
    peak = std::max(peak, ++held);
    if (!training) --held;
  } else if (kind == ActionKind::kBackward || kind == ActionKind::kBackwardWeight) {
    --held;
  }
}

}  // namespace

Schedule BuildSchedule(ScheduleKind kind, int devices, int microbatches, int chunks) {
  CheckRuledOut(kind, devices, microbatches, chunks);
  Schedule schedule;
  schedule.kind = kind;
  schedule.stages = devices * chunks;
  schedule.microbatches = microbatches;
  schedule.actions.resize(devices);
  const std::vector<int> placement = StagePlacement(kind, devices, chunks);
  if (chunks > 1) schedule.stage_device = placement;
  const std::vector<std::vector<int>> device_stages = DeviceStages(placement, devices);
  const int last = schedule.stages - 1;
  // F, I and W or B for each micro-batch on each chunk, most with a transfer either side.
  for (auto& list : schedule.actions) list.reserve(size_t(chunks) * microbatches * 7);
  EachCompute(kind, devices, microbatches, chunks, [&](int d, ActionKind k, int chunk, int m) {
    auto& list = schedule.actions[d];
    const int s = device_stages[d][chunk];
    const bool forward = k == ActionKind::kForward;
    const bool receives = forward ? s > 0 : IsBackward(k) && s < last;
    const bool sends = forward ? s < last : IsBackward(k) && s > 0;
    if (receives) list.push_back({s, forward ? ActionKind::kRecvF : ActionKind::kRecvB, m});
    list.push_back({s, k, m});
    if (sends) list.push_back({s, forward ? ActionKind::kSendF : ActionKind::kSendB, m});
  });
  return schedule;
}

std::vector<int> MicrobatchesInFlight(ScheduleKind kind, int devices, int microbatches, int chunks) {
  CheckRuledOut(kind, devices, microbatches, chunks);
  const std::vector<std::vector<int>> device_stages = DeviceStages(StagePlacement(kind, devices, chunks), devices);
  std::vector<int> held(size_t(devices) * chunks, 0), peak = held;
  EachCompute(kind, devices, microbatches, chunks, [&](int d, ActionKind k, int chunk, int) {
    const int s = device_stages[d][chunk];
    CountHeld(k, IsTraining(kind), held[s], peak[s]);
  });
  return peak;
}

Schedule WithWholeBackward(Schedule schedule, const std::vector<bool>& whole) {
  const auto is_whole = [&](int stage) { return stage >= 0 && stage < int(whole.size()) && whole[stage]; };
  for (std::vector<Action>& list : schedule.actions) {
    std::vector<Action> out;
    out.reserve(list.size());
    for (Action a : list) {
      if (is_whole(a.stage) && a.kind == ActionKind::kBackwardWeight) continue;
      if (is_whole(a.stage) && a.kind == ActionKind::kBackwardInput) a.kind = ActionKind::kBackward;
      out.push_back(a);
    }
    list = std::move(out);
  }
  return schedule;
}

std::vector<Action> ComputeActions(const std::vector<Action>& list) {
  std::vector<Action> out;
  for (const Action& a : list) {
    if (IsCompute(a.kind)) out.push_back(a);
  }
  return out;
}

std::vector<int> MicrobatchesInFlight(const Schedule& schedule) {
  std::vector<int> held(schedule.stages, 0), peak(schedule.stages, 0);
  const bool training = IsTraining(schedule.kind);
  for (const auto& list : schedule.actions) {
    for (const Action& a : list) {
      if (a.stage >= 0 && a.stage < schedule.stages) CountHeld(a.kind, training, held[a.stage], peak[a.stage]);
    }
  }
  return peak;
}

}  // namespace mp
