// Discrete-event simulation of one pipeline step: replays a Schedule's
// per-device action lists with per-stage compute times and per-boundary
// transfer times, and reports the step time, busy/idle time and bubble, the
// peak memory of each stage and device and a timeline a report can draw as a
// Gantt chart.
//
// Cost model: a device runs its stages' F/B/I/W one at a time in list order; a
// SEND starts its transfer on the link to the peer as soon as the tensor is
// ready and the link is free (links are full duplex: activations forward and
// gradients backward travel on separate lanes, each one transfer at a time);
// the SEND itself costs the device nothing. A RECV blocks the device until
// its transfer has arrived. Stages that share one machine (CPU workers)
// slow each other down while they compute at the same time: with a
// `slowdown` table, a compute action takes its own time scaled by the
// table's factor averaged over its interval (slowdown[n - 1] while n stages
// compute), so a pipeline whose stages rarely overlap (one micro-batch)
// pays nothing and a full one pays the measured factor.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "planner/schedule/replay_order.h"
#include "planner/schedule/schedule.h"

namespace mp {

struct StageTimes {
  double forward_ms = 0;   // one micro-batch
  double backward_ms = 0;  // B: the whole backward
  // I and W, the backward split (zero-bubble schedules): the input
  // gradients, then the weight gradients.
  double input_backward_ms = 0;
  double weight_backward_ms = 0;
};

// The boundary between stage s and s + 1: the time to move one micro-batch's
// activations forward and its gradients backward (latency included; 0 when
// nothing crosses).
struct TransferTimes {
  double forward_ms = 0;
  double backward_ms = 0;
};

struct StageMemory {
  int64_t static_bytes = 0;      // parameters (+ gradients, optimizer state)
  int64_t activation_bytes = 0;  // per micro-batch held by the stage (from F until B or W)
  // At its B or I: what its backward holds beyond its activations at its
  // most (StageCostModel::TransientBytes).
  int64_t transient_bytes = 0;
  // Split backward (I, W): what I keeps for W per micro-batch, from I until W.
  int64_t weight_gradient_bytes = 0;
  // Training: the part of static_bytes that is the parameters' gradients.
  // They are made by the stage's first B (or W) of a step, as mpexec clears
  // them before each step (optimizer.zero_grad(set_to_none=True)), so a
  // device's peak before then holds none: GPipe's, after every forward.
  int64_t gradient_bytes = 0;
  // Training: the part of activation_bytes that is what the stage receives
  // from the stage before. Where both are on one device (zbv's middle
  // device) it is the tensor the sender holds, held once.
  int64_t received_bytes = 0;
  // Training: the most one micro-batch's forward has live at once (what it
  // received, the values crossing the op running and what that op makes),
  // which can be more than it keeps (a convolution's output that a pooling
  // shrinks); 0: activation_bytes.
  int64_t forward_peak_bytes = 0;
  // Split backward: of activation_bytes, what I frees (W keeps only what
  // its weight gradients need).
  int64_t freed_by_i_bytes = 0;
  // Split backward: at its W, beyond what I left (one node's weights'
  // gradients; the first stage's W: a whole backward's).
  int64_t weight_transient_bytes = 0;
  // Training: the gradients it sends to the stage before, held by this
  // stage from its I (or B) until that stage's RECV_B takes them, where
  // that stage is on another device.
  int64_t sent_gradient_bytes = 0;
};

struct SimResult {
  double step_ms = 0;
  std::vector<double> busy_ms;            // per stage: sum of its F/B/I/W times
  std::vector<double> device_busy_ms;     // per device: its stages' busy_ms
  std::vector<double> idle_ms;            // per device: step_ms - device_busy_ms - optimizer_ms
  double bubble_fraction = 0;             // sum idle / (devices * step_ms)
  std::vector<int> max_in_flight;         // per stage: micro-batches held at once
  std::vector<int64_t> peak_memory_bytes; // per stage: static + max_in_flight * activation + transient
  // Per device: its stages' static bytes plus the most its stages hold at
  // one moment: the activations held, with the forward's peak while an F
  // runs and a transient while a B, I or W runs (one action at a time),
  // and the gradients it sent that their receiver has not taken yet.
  std::vector<int64_t> device_peak_memory_bytes;
  std::vector<double> allreduce_ms;       // per stage: its gradient all-reduce after its device's last action
  std::vector<double> optimizer_ms;       // per device: its stages' optimizer step, after its all-reduces
  double replica_wait_ms = 0;             // the step's wait for the latest replica (idle on every device)
  std::vector<std::vector<TimedAction>> timeline;  // per device, in list order
};

// `stages` has one entry per stage; `transfers` one per boundary between
// consecutive stages (stages - 1) or is empty for free transfers; `memory` one per stage or empty (all zero);
// `allreduce_ms` one per stage or empty: data-parallel replicas all-reduce a
// device's stages' gradients once its whole list is done, one stage after
// another, so the step ends when the last device's last all-reduce does
// (idle and bubble include that time);
// `slowdown` is empty or the factors (each >= 1) for 1, 2, ... devices
// computing at once, the last one serving any more. Throws InputError for
// mismatched sizes, factors below 1 and lists that deadlock.
// `step_overhead_ms` is the runtime's fixed cost per step beyond the
// actions (handing each device its list and joining them:
// planner/profile/step_overhead.h), added to the step with every device
// idle for it.
// `optimizer_ms` one per stage or empty: the optimizer's step on its
// parameters, which its device runs after its list and its all-reduces
// (work, not idle: outside the bubble); the step ends when the last
// device's does. That is each rank of mpexec over processes; CPU workers
// in one process start their steps together once every list is done (so
// a step that fails changes no weight), which ends later where a device
// that finished early has more to step than the last to finish.
// `replica_wait_share`: with replicas, the share of the step (before the
// overhead) that each sum's wait for the latest of them adds
// (ReplicaWaitShare, profile.h), idle on every device.
// `track_memory` false: the times only (no peaks, no max_in_flight, and no
// timeline where no slowdown needs one), for a search that compares steps
// (a sixth of its time went to TrackMemory, as much to the timeline).
// `order`: OrderForReplay(schedule), for a caller that simulates one
// schedule many times; null: worked out here.
// `give_up_at_ms`: a step the caller takes only below (a search's
// neighbouring cut, against the cut it has): the replay stops once the
// step surely reaches it and returns step_ms = infinity, nothing else set.
// A step below it comes back whole, the same as without it.
SimResult SimulateStep(const Schedule& schedule, const std::vector<StageTimes>& stages,
                       const std::vector<TransferTimes>& transfers = {}, const std::vector<StageMemory>& memory = {},
                       const std::vector<double>& allreduce_ms = {}, const std::vector<double>& slowdown = {},
                       double step_overhead_ms = 0, const std::vector<double>& optimizer_ms = {},
                       double replica_wait_share = 0, bool track_memory = true,
                       const ReplayOrder* order = nullptr,
                       double give_up_at_ms = std::numeric_limits<double>::infinity());

// The simulator's slowdown table for one pipeline of `stages` stages on
// one machine's CPU workers, its replicas running alongside: entry n - 1 is the factor
// while n of its stages (n * replicas workers in all) compute at once, from
// shared_slowdown ([k - 1]: k workers at once; beyond its end: the last
// entry). Empty when that is.
std::vector<double> PipelineSlowdown(const std::vector<double>& shared_slowdown, int stages, int replicas);

}  // namespace mp
