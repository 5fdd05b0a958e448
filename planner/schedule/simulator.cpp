// SimulateStep: an event-driven replay of the per-stage action lists. Every
// resource (a stage's device, one direction of a link) serves exactly one
// list in that list's order, so each action's start is fixed once the
// actions it waits on are timed; stages are advanced in rounds until each is
// blocked on a RECV whose SEND has not been timed yet. A round with no
// progress is a deadlock. Cost: O(actions + rounds * stages).
#include "planner/schedule/simulator.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.h"

namespace mp {
namespace {

constexpr double kNotYet = -1;
constexpr int kContentionRounds = 12;

// Each compute action's time, per stage in list order (0 for the others).
using Durations = std::vector<std::vector<double>>;

// One replay of the lists with the actions' compute times fixed.
SimResult Replay(const Schedule& sch, const Durations& durations, const std::vector<TransferTimes>& transfers,
                 const std::vector<StageMemory>& memory, const std::vector<double>& allreduce_ms) {
  const int K = sch.stages;
  const int M = sch.microbatches;
  // arrival[dir][boundary * M + mb]: when a transfer lands on the receiver.
  std::vector<double> arrival[2];
  arrival[0].assign(size_t(std::max(K - 1, 0)) * M, kNotYet);  // forward activations
  arrival[1] = arrival[0];                                      // backward gradients
  std::vector<double> lane_free[2] = {std::vector<double>(K, 0), std::vector<double>(K, 0)};
  std::vector<double> clock(K, 0);
  std::vector<size_t> next(K, 0);

  SimResult result;
  result.busy_ms.assign(K, 0);
  result.timeline.resize(K);
  result.max_in_flight.assign(K, 0);
  std::vector<int> in_flight(K, 0);
  for (int s = 0; s < K; ++s) result.timeline[s].reserve(sch.actions[s].size());

  size_t remaining = 0;
  for (const auto& list : sch.actions) remaining += list.size();
  const bool training = IsTraining(sch.kind);
  while (remaining > 0) {
    bool progressed = false;
    for (int s = 0; s < K; ++s) {
      const auto& list = sch.actions[s];
      while (next[s] < list.size()) {
        const Action& a = list[next[s]];
        TimedAction timed{a, clock[s], clock[s]};
        if (a.microbatch < 0 || a.microbatch >= M) {
          throw InputError(Concat("simulate: ", FormatAction(a), " micro-batch out of range (", M, ")"));
        }
        if (IsCompute(a.kind)) {
          timed.end_ms = clock[s] = clock[s] + durations[s][next[s]];
          result.busy_ms[s] += timed.end_ms - timed.start_ms;
          in_flight[s] += a.kind == ActionKind::kForward ? 1 : -1;
          result.max_in_flight[s] = std::max(result.max_in_flight[s], training ? in_flight[s] : 1);
        } else {
          const int peer = PeerStage(a);
          if (peer < 0 || peer >= K) throw InputError(Concat("simulate: ", FormatAction(a), " has no peer stage"));
          const int boundary = std::min(s, peer);
          const int dir = (a.kind == ActionKind::kSendF || a.kind == ActionKind::kRecvF) ? 0 : 1;
          double& landed = arrival[dir][size_t(boundary) * M + a.microbatch];
          if (IsSend(a.kind)) {
            const double ms = transfers.empty() ? 0
                              : dir == 0        ? transfers[boundary].forward_ms
                                                : transfers[boundary].backward_ms;
            timed.start_ms = std::max(clock[s], lane_free[dir][boundary]);
            timed.end_ms = lane_free[dir][boundary] = landed = timed.start_ms + ms;
          } else {
            if (landed == kNotYet) break;  // blocked until the peer sends
            timed.end_ms = clock[s] = std::max(clock[s], landed);
          }
        }
        result.timeline[s].push_back(timed);
        ++next[s];
        --remaining;
        progressed = true;
      }
    }
    if (!progressed) {
      for (int s = 0; s < K; ++s) {
        if (next[s] < sch.actions[s].size()) {
          throw InputError(Concat("simulate: schedule deadlocks at stage ", s, " action ",
                                  FormatAction(sch.actions[s][next[s]])));
        }
      }
    }
  }

  result.allreduce_ms = allreduce_ms.empty() ? std::vector<double>(K, 0) : allreduce_ms;
  for (int s = 0; s < K; ++s) {
    double done = clock[s];
    for (const auto& t : result.timeline[s]) done = std::max(done, t.end_ms);
    result.step_ms = std::max(result.step_ms, done + result.allreduce_ms[s]);
  }
  double idle = 0;
  result.idle_ms.resize(K);
  result.peak_memory_bytes.resize(K);
  for (int s = 0; s < K; ++s) {
    result.idle_ms[s] = result.step_ms - result.busy_ms[s];
    idle += result.idle_ms[s];
    const StageMemory mem = memory.empty() ? StageMemory{} : memory[s];
    result.peak_memory_bytes[s] = mem.static_bytes + mem.activation_bytes * result.max_in_flight[s];
  }
  result.bubble_fraction = result.step_ms > 0 ? idle / (K * result.step_ms) : 0;
  return result;
}

// Each compute action's slowdown averaged over its interval in `timed`:
// while n stages compute at once, time runs at slowdown[n - 1]. A sweep
// over the intervals' ends gives the piecewise-constant count and its
// running integral. O(A log A) for A compute actions.
Durations AverageSlowdown(const SimResult& timed, const std::vector<double>& slowdown) {
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
  Durations average(timed.timeline.size());
  for (size_t s = 0; s < timed.timeline.size(); ++s) {
    for (const TimedAction& t : timed.timeline[s]) {
      const double span = t.end_ms - t.start_ms;
      average[s].push_back(IsCompute(t.action.kind) && span > 0 ? (at(t.end_ms) - at(t.start_ms)) / span : 1.0);
    }
  }
  return average;
}

}  // namespace

SimResult SimulateStep(const Schedule& sch, const std::vector<StageTimes>& stages,
                       const std::vector<TransferTimes>& transfers, const std::vector<StageMemory>& memory,
                       const std::vector<double>& allreduce_ms, const std::vector<double>& slowdown) {
  const int K = sch.stages;
  if (int(stages.size()) != K || int(sch.actions.size()) != K) {
    throw InputError(Concat("simulate: ", stages.size(), " stage times and ", sch.actions.size(), " action lists for ",
                            K, " stages"));
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
  Durations base(K);
  for (int s = 0; s < K; ++s) {
    for (const Action& a : sch.actions[s]) {
      base[s].push_back(a.kind == ActionKind::kForward    ? stages[s].forward_ms
                        : a.kind == ActionKind::kBackward ? stages[s].backward_ms
                                                          : 0.0);
    }
  }
  SimResult result = Replay(sch, base, transfers, memory, allreduce_ms);
  // (With replicas, one stage computing already shares the machine.)
  if (std::none_of(slowdown.begin(), slowdown.end(), [](double f) { return f > 1; })) return result;
  // Contention: an action's time depends on what overlaps it, which depends
  // on the times. Iterate to the fixed point (a few rounds: overlaps change
  // little once the slowed actions are in place).
  for (int round = 0; round < kContentionRounds; ++round) {
    const Durations average = AverageSlowdown(result, slowdown);
    Durations slowed = base;
    double change = 0;
    for (int s = 0; s < K; ++s) {
      for (size_t i = 0; i < slowed[s].size(); ++i) {
        slowed[s][i] *= average[s][i];
        const double before = result.timeline[s][i].end_ms - result.timeline[s][i].start_ms;
        if (IsCompute(sch.actions[s][i].kind) && before > 0)
          change = std::max(change, std::abs(slowed[s][i] / before - 1));
      }
    }
    result = Replay(sch, slowed, transfers, memory, allreduce_ms);
    if (change < 1e-4) break;
  }
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
