// SimulateStep: an event-driven replay of the per-stage action lists. Every
// resource (a stage's device, one direction of a link) serves exactly one
// list in that list's order, so each action's start is fixed once the
// actions it waits on are timed; stages are advanced in rounds until each is
// blocked on a RECV whose SEND has not been timed yet. A round with no
// progress is a deadlock. Cost: O(actions + rounds * stages).
#include "planner/schedule/simulator.h"

#include <algorithm>
#include <limits>

#include "common/error.h"

namespace mp {
namespace {

constexpr double kNotYet = -1;

double ComputeMs(const Action& a, const std::vector<StageTimes>& stages) {
  return a.kind == ActionKind::kForward ? stages[a.stage].forward_ms : stages[a.stage].backward_ms;
}

}  // namespace

SimResult SimulateStep(const Schedule& sch, const std::vector<StageTimes>& stages,
                       const std::vector<TransferTimes>& transfers, const std::vector<StageMemory>& memory,
                       const std::vector<double>& allreduce_ms) {
  const int K = sch.stages;
  const int M = sch.microbatches;
  if (int(stages.size()) != K || int(sch.actions.size()) != K) {
    throw InputError(Concat("simulate: ", stages.size(), " stage times and ", sch.actions.size(),
                            " action lists for ", K, " stages"));
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
          timed.end_ms = clock[s] = clock[s] + ComputeMs(a, stages);
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

}  // namespace mp
