// SimulateStep: a replay of the per-device action lists. Every resource (a
// device, one direction of a link) serves exactly one list in that list's
// order, so each action's start is fixed once the actions it waits on are
// timed: the actions are timed in an order that puts those first
// (OrderForReplay, which finds a deadlock), one pass. Cost: O(actions) a
// replay, and O(actions + rounds * devices) for the order.
#include "planner/schedule/simulator.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.h"

namespace mp {
namespace {

constexpr int kContentionRounds = 12;

// A factor per action, per device in list order (AverageSlowdown).
using Factors = std::vector<std::vector<double>>;

// Each stage's and device's peak memory, from the timed lists: a device's
// actions in its list's order, holding what each leaves. A gradient sent to
// a stage on another device stays with its sender (one tensor between
// threads; a send buffer on a GPU) until the receiver's RECV_B has taken
// it, so it is held across whatever its sender runs before then.
void TrackMemory(const Schedule& sch, const std::vector<StageMemory>& memory, SimResult& result) {
  const int S = sch.stages;
  const int D = sch.Devices();
  const int M = sch.microbatches;
  result.max_in_flight.assign(S, 0);
  result.device_peak_memory_bytes.assign(D, 0);
  result.peak_memory_bytes.assign(S, 0);
  const bool training = IsTraining(sch.kind);
  const StageMemory none;
  const auto mem = [&](int s) -> const StageMemory& { return memory.empty() ? none : memory[s]; };
  // What stage s receives from a stage on its own device: the tensor the sender holds already.
  const auto held_by_sender = [&](int s) {
    return s > 0 && sch.DeviceOf(s - 1) == sch.DeviceOf(s) ? mem(s).received_bytes : int64_t(0);
  };
  const auto activation = [&](int s) { return std::max(int64_t(0), mem(s).activation_bytes - held_by_sender(s)); };
  const auto forward_peak = [&](int s) {
    return std::max(activation(s), mem(s).forward_peak_bytes - held_by_sender(s));
  };
  const auto transient = [&](int s, ActionKind kind) {
    return kind == ActionKind::kBackwardWeight ? mem(s).weight_transient_bytes : mem(s).transient_bytes;
  };
  const auto freed_by_i = [&](int s) { return std::min(activation(s), mem(s).freed_by_i_bytes); };
  const auto gradients = [&](int s) { return std::min(mem(s).gradient_bytes, mem(s).static_bytes); };
  // taken[s * M + mb]: when stage s took micro-batch mb's gradients from stage s + 1 (its RECV_B's end).
  std::vector<double> taken(size_t(std::max(S - 1, 0)) * M, std::numeric_limits<double>::infinity());
  for (const auto& list : result.timeline)
    for (const TimedAction& t : list)
      if (t.action.kind == ActionKind::kRecvB) taken[size_t(t.action.stage) * M + t.action.microbatch] = t.end_ms;

  std::vector<int> in_flight(S, 0);
  std::vector<bool> has_gradients(S, false);  // per stage: its first B or W has run
  std::vector<int> between(S, 0), max_between(S, 0);  // per stage: micro-batches past their I, before their W
  for (int d = 0; d < D; ++d) {
    int64_t held = 0;  // what the device's stages hold now
    std::vector<std::pair<double, int64_t>> sent;  // gradients it holds for a receiver: (taken at, bytes)
    const auto note = [&](int64_t bytes) {
      result.device_peak_memory_bytes[d] = std::max(result.device_peak_memory_bytes[d], bytes);
    };
    for (const TimedAction& t : result.timeline[d]) {
      const Action& a = t.action;
      const int s = a.stage;
      if (!IsCompute(a.kind)) continue;
      for (auto it = sent.begin(); it != sent.end();) {
        if (it->first <= t.start_ms) held -= it->second, it = sent.erase(it);
        else ++it;
      }
      if (a.kind == ActionKind::kForward) {
        ++in_flight[s];
        note(held + forward_peak(s));
        held += activation(s);
        result.max_in_flight[s] = std::max(result.max_in_flight[s], training ? in_flight[s] : 1);
        if (!training) --in_flight[s], held -= activation(s);
        continue;
      }
      if (a.kind == ActionKind::kBackwardInput) {
        max_between[s] = std::max(max_between[s], ++between[s]);
        note(held + transient(s, a.kind));
        held += mem(s).weight_gradient_bytes - freed_by_i(s);
      } else {
        // A stage's first W makes its parameters' gradients before it
        // lets go of what I kept (GPT's last stage: 2 MiB over).
        const bool first_w = a.kind == ActionKind::kBackwardWeight && !has_gradients[s];
        note(held + (first_w ? std::max(transient(s, a.kind), gradients(s)) : transient(s, a.kind)));
        --in_flight[s];
        held -= activation(s);
        if (a.kind == ActionKind::kBackwardWeight) --between[s], held -= mem(s).weight_gradient_bytes - freed_by_i(s);
        if (!has_gradients[s]) has_gradients[s] = true, held += gradients(s);
      }
      if (a.kind != ActionKind::kBackwardWeight && s > 0 && sch.DeviceOf(s - 1) != d) {
        sent.push_back({taken[size_t(s - 1) * M + a.microbatch], mem(s).sent_gradient_bytes});
        held += sent.back().second;
      }
      note(held);
    }
  }
  for (int s = 0; s < S; ++s) {
    const StageMemory& m = mem(s);
    result.peak_memory_bytes[s] = m.static_bytes + m.activation_bytes * result.max_in_flight[s] +
                                  m.weight_gradient_bytes * max_between[s] +
                                  std::max(m.transient_bytes, m.weight_transient_bytes);
    result.device_peak_memory_bytes[sch.DeviceOf(s)] += m.static_bytes - gradients(s);  // those: in `held`
  }
}

// Where a replay may stop: per device, the least it can end at (its
// compute, all-reduces and optimizer steps: what it runs with no wait), and
// the step the caller takes only below. A device ends no earlier than that
// least plus the waits it has met so far, so once a device's reaches the
// step, the replay stops (a search's neighbouring cuts, most of them slower
// by a little: on a 1,000-node DAG they stop 88% of the way, a tenth off
// its search).
struct GiveUp {
  std::vector<double> least_ms;  // per device; empty: never
  double at_ms = std::numeric_limits<double>::infinity();
};

// One replay of the lists in `order` with each compute step's time from
// `duration(step number, step)`; the timeline only where `timeline` (a
// search comparing steps spent a sixth of its time on it). Where it gives
// up (`give_up`), step_ms is infinity and nothing else is set.
template <typename Duration>
SimResult Replay(const Schedule& sch, const ReplayOrder& order, Duration duration,
                 const std::vector<TransferTimes>& transfers, const std::vector<double>& allreduce_ms,
                 double step_overhead_ms, const std::vector<double>& optimizer_ms, double replica_wait_share,
                 bool timeline = true, const GiveUp& give_up = {}) {
  const int S = sch.stages;
  const int D = sch.Devices();
  std::vector<double> arrival(size_t(order.transfers), 0);  // when a transfer lands on the receiver
  std::vector<double> lane_free(size_t(order.lanes), 0);
  std::vector<double> clock(D, 0);
  std::vector<double> stage_done(S, 0);
  // Per device, its least end plus its waits so far; the step that makes
  // (with a margin for the sums' rounding) against give_up.at_ms.
  std::vector<double> floor = give_up.least_ms;
  const auto gives_up = [&](int d) {
    return !floor.empty() && floor[d] * (1 - 1e-12) * (1 + replica_wait_share) + step_overhead_ms >= give_up.at_ms;
  };
  const auto given_up = [] {
    SimResult none;
    none.step_ms = std::numeric_limits<double>::infinity();
    return none;
  };
  for (int d = 0; d < D; ++d)
    if (gives_up(d)) return given_up();

  SimResult result;
  result.busy_ms.assign(S, 0);
  result.device_busy_ms.assign(D, 0);
  if (timeline) {
    result.timeline.resize(D);
    for (int d = 0; d < D; ++d) result.timeline[d].resize(sch.actions[d].size());
  }
  for (size_t i = 0; i < order.steps.size(); ++i) {
    const ReplayStep& st = order.steps[i];
    double& now = clock[st.device];
    double start = now, end = now;
    switch (st.op) {
      case ReplayStep::kCompute:
        end = now = now + duration(i, st);
        result.busy_ms[st.stage] += end - start;
        result.device_busy_ms[st.device] += end - start;
        break;
      case ReplayStep::kSend: {  // the device goes on; the transfer waits for its lane
        const double ms = transfers.empty() ? 0
                          : st.forward      ? transfers[st.boundary].forward_ms
                                            : transfers[st.boundary].backward_ms;
        double& free = lane_free[st.lane];
        start = std::max(now, free);
        end = free = arrival[st.transfer] = start + ms;
        break;
      }
      case ReplayStep::kRecv:
        if (arrival[st.transfer] > now) {
          if (!floor.empty()) {
            floor[st.device] += arrival[st.transfer] - now;
            if (gives_up(st.device)) return given_up();
          }
          now = arrival[st.transfer];
        }
        end = now;
        break;
    }
    stage_done[st.stage] = std::max(stage_done[st.stage], end);
    if (timeline) result.timeline[st.device][st.index] = {sch.actions[st.device][st.index], start, end};
  }

  // A device's stages all-reduce their gradients once its whole list is
  // done, one stage after another, as mpexec does when a rank's workers end
  // (executor/runtime/gradient_sync.h).
  result.allreduce_ms = allreduce_ms.empty() ? std::vector<double>(S, 0) : allreduce_ms;
  std::vector<double> device_done = clock;
  for (int s = 0; s < S; ++s) device_done[sch.DeviceOf(s)] = std::max(device_done[sch.DeviceOf(s)], stage_done[s]);
  for (int s = 0; s < S; ++s) device_done[sch.DeviceOf(s)] += result.allreduce_ms[s];
  // Then its optimizer's step on its stages' parameters (executor/runtime/gradient_sync.h).
  result.optimizer_ms.assign(D, 0);
  for (int s = 0; s < S && !optimizer_ms.empty(); ++s) result.optimizer_ms[sch.DeviceOf(s)] += optimizer_ms[s];
  for (int d = 0; d < D; ++d) device_done[d] += result.optimizer_ms[d];
  for (int d = 0; d < D; ++d) result.step_ms = std::max(result.step_ms, device_done[d]);
  result.replica_wait_ms = replica_wait_share * result.step_ms;
  result.step_ms += result.replica_wait_ms + step_overhead_ms;  // every device idle meanwhile
  double idle = 0;
  result.idle_ms.resize(D);
  for (int d = 0; d < D; ++d) {
    result.idle_ms[d] = result.step_ms - result.device_busy_ms[d] - result.optimizer_ms[d];
    idle += result.idle_ms[d];
  }
  result.bubble_fraction = result.step_ms > 0 ? idle / (D * result.step_ms) : 0;
  return result;
}

// Each compute action's slowdown averaged over its interval in `timed`:
// while n stages compute at once, time runs at slowdown[n - 1]. A sweep
// over the intervals' ends gives the piecewise-constant count and its
// running integral. O(A log A) for A compute actions.
Factors AverageSlowdown(const SimResult& timed, const std::vector<double>& slowdown) {
  std::vector<std::pair<double, int>> edges;  // (time, +1 start / -1 end)
  for (const auto& list : timed.timeline)
    for (const TimedAction& t : list)
      if (IsCompute(t.action.kind) && t.end_ms > t.start_ms)
        edges.push_back({t.start_ms, 1}), edges.push_back({t.end_ms, -1});
  std::sort(edges.begin(), edges.end());
  const auto factor = [&](int n) { return n < 1 ? 1.0 : slowdown[std::min<size_t>(n, slowdown.size()) - 1]; };
  std::vector<double> times, integral;  // integral[i]: of the factor from 0 to times[i]
  int running = 0;
  for (const auto& [t, delta] : edges) {
    if (times.empty()) {
      times.push_back(t), integral.push_back(0);
    } else if (t > times.back()) {
      integral.push_back(integral.back() + factor(running) * (t - times.back()));
      times.push_back(t);
    }
    running += delta;
  }
  const auto at = [&](double t) { return integral[std::lower_bound(times.begin(), times.end(), t) - times.begin()]; };
  Factors average(timed.timeline.size());
  for (size_t d = 0; d < timed.timeline.size(); ++d) {
    for (const TimedAction& t : timed.timeline[d]) {
      const double span = t.end_ms - t.start_ms;
      average[d].push_back(IsCompute(t.action.kind) && span > 0 ? (at(t.end_ms) - at(t.start_ms)) / span : 1.0);
    }
  }
  return average;
}

}  // namespace

SimResult SimulateStep(const Schedule& sch, const std::vector<StageTimes>& stages,
                       const std::vector<TransferTimes>& transfers, const std::vector<StageMemory>& memory,
                       const std::vector<double>& allreduce_ms, const std::vector<double>& slowdown,
                       double step_overhead_ms, const std::vector<double>& optimizer_ms, double replica_wait_share,
                       bool track_memory, const ReplayOrder* order, double give_up_at_ms) {
  const int K = sch.stages;
  if (int(stages.size()) != K) {
    throw InputError(Concat("simulate: ", stages.size(), " stage times for ", K, " stages"));
  }
  if (sch.stage_device.empty() ? sch.Devices() != K : int(sch.stage_device.size()) != K) {
    throw InputError(Concat("simulate: ", sch.Devices(), " action lists and ", sch.stage_device.size(),
                            " stage placements for ", K, " stages"));
  }
  if (!transfers.empty() && int(transfers.size()) != K - 1) {
    throw InputError(Concat("simulate: ", transfers.size(), " transfer times for ", K - 1, " boundaries"));
  }
  if (!memory.empty() && int(memory.size()) != K) {
    throw InputError(Concat("simulate: ", memory.size(), " memory entries for ", K, " stages"));
  }
  if (!allreduce_ms.empty() && int(allreduce_ms.size()) != K) {
    throw InputError(Concat("simulate: ", allreduce_ms.size(), " all-reduce times for ", K, " stages"));
  }
  for (double f : slowdown)
    if (!(f >= 1)) throw InputError(Concat("simulate: slowdown factor ", f, "; expected >= 1"));
  if (!(step_overhead_ms >= 0)) throw InputError(Concat("simulate: step overhead ", step_overhead_ms, " ms"));
  if (!(replica_wait_share >= 0)) {
    throw InputError(Concat("simulate: replicas' wait ", replica_wait_share, " of the step; expected >= 0"));
  }
  if (!optimizer_ms.empty() && int(optimizer_ms.size()) != K) {
    throw InputError(Concat("simulate: ", optimizer_ms.size(), " optimizer times for ", K, " stages"));
  }
  for (double ms : optimizer_ms)
    if (!(ms >= 0)) throw InputError(Concat("simulate: optimizer step ", ms, " ms; expected >= 0"));
  if (order) {  // the caller's, which must be this schedule's
    size_t actions = 0;
    for (const auto& list : sch.actions) actions += list.size();
    if (order->steps.size() != actions) {
      throw InternalError(Concat("simulate: a replay order of ", order->steps.size(), " steps for ", actions,
                                 " actions"));
    }
  }
  const ReplayOrder own = order ? ReplayOrder{} : OrderForReplay(sch);
  const ReplayOrder& steps = order ? *order : own;
  // Each stage's F, B, I and W, as ReplayStep::times reads them.
  std::vector<double> times(size_t(K) * 4);
  for (int s = 0; s < K; ++s) {
    const StageTimes& t = stages[s];
    times[4 * s] = t.forward_ms, times[4 * s + 1] = t.backward_ms;
    times[4 * s + 2] = t.input_backward_ms, times[4 * s + 3] = t.weight_backward_ms;
  }
  // (With replicas, one stage computing already shares the machine.)
  const bool contention = std::any_of(slowdown.begin(), slowdown.end(), [](double f) { return f > 1; });
  // Slowed times are no shorter, so the step without contention is at most
  // the step with it: the first replay may give up.
  GiveUp give_up;
  if (give_up_at_ms < std::numeric_limits<double>::infinity()) {
    give_up.at_ms = give_up_at_ms;
    give_up.least_ms.assign(size_t(sch.Devices()), 0);
    for (int s = 0; s < K; ++s) {
      double& least = give_up.least_ms[size_t(sch.DeviceOf(s))];
      for (int k = 0; k < 4; ++k) least += steps.uses[size_t(4 * s + k)] * times[size_t(4 * s + k)];
      if (!allreduce_ms.empty()) least += allreduce_ms[s];
      if (!optimizer_ms.empty()) least += optimizer_ms[s];
    }
  }
  SimResult result = Replay(
      sch, steps, [&](size_t, const ReplayStep& st) { return times[st.times]; }, transfers, allreduce_ms,
      step_overhead_ms, optimizer_ms, replica_wait_share, track_memory || contention, give_up);
  if (!(result.step_ms < std::numeric_limits<double>::infinity())) return result;
  if (!contention) {
    if (track_memory) TrackMemory(sch, memory, result);
    return result;
  }
  // Contention: an action's time depends on what overlaps it, which depends
  // on the times. Iterate to the fixed point (a few rounds: overlaps change
  // little once the slowed actions are in place).
  std::vector<double> slowed(steps.steps.size(), 0);  // per step
  for (int round = 0; round < kContentionRounds; ++round) {
    const Factors average = AverageSlowdown(result, slowdown);
    double change = 0;
    for (size_t i = 0; i < steps.steps.size(); ++i) {
      const ReplayStep& st = steps.steps[i];
      if (st.op != ReplayStep::kCompute) continue;
      slowed[i] = times[st.times] * average[st.device][st.index];
      const TimedAction& before = result.timeline[st.device][st.index];
      const double span = before.end_ms - before.start_ms;
      if (span > 0) change = std::max(change, std::abs(slowed[i] / span - 1));
    }
    result = Replay(
        sch, steps, [&](size_t i, const ReplayStep&) { return slowed[i]; }, transfers, allreduce_ms,
        step_overhead_ms, optimizer_ms, replica_wait_share);
    if (change < 1e-4) break;
  }
  if (track_memory) TrackMemory(sch, memory, result);  // once, on the final timeline
  return result;
}

std::vector<double> PipelineSlowdown(const std::vector<double>& shared_slowdown, int stages, int replicas) {
  std::vector<double> table;
  if (shared_slowdown.empty()) return table;
  for (int n = 1; n <= stages; ++n)
    table.push_back(shared_slowdown[std::min<size_t>(size_t(n) * std::max(replicas, 1), shared_slowdown.size()) - 1]);
  return table;
}

}  // namespace mp
