// The order in which the simulator times a schedule's actions. Each action
// waits only on the action before it in its device's list and, for a RECV,
// on its SEND (every link lane carries one device's sends, in its list's
// order), so any order that puts those first gives the same times: one
// worked out once serves every replay of the schedule, whatever its times
// (the search's neighbouring cuts, contention's rounds), as a flat list
// with each step's stage, transfer and lane resolved.
#pragma once

#include <vector>

#include "planner/schedule/schedule.h"

namespace mp {

struct ReplayStep {
  enum Op { kCompute, kSend, kRecv };
  Op op = kCompute;
  int device = 0;
  int index = 0;     // in its device's list
  int stage = 0;
  int times = 0;     // compute: stage * 4 + 0 F, 1 B, 2 I, 3 W (StageTimes' order)
  int boundary = 0;  // SEND and RECV: the boundary between stages boundary and boundary + 1
  int forward = 0;   // SEND and RECV: 1 for activations forward, 0 for gradients backward
  int transfer = 0;  // SEND and RECV: its slot, (direction, boundary, micro-batch)
  int lane = 0;      // SEND: its link lane, (direction, boundary)
};

struct ReplayOrder {
  std::vector<ReplayStep> steps;
  int transfers = 0;  // slots
  int lanes = 0;
  std::vector<int> uses;  // per compute time (ReplayStep::times): the steps that take it
};

// Devices are taken in rounds, each running its list until a RECV whose
// SEND is not placed yet. Throws InputError naming the action for a stage
// or micro-batch out of range, a transfer with no peer stage, and a round
// with no progress (the lists deadlock): "simulate: schedule deadlocks on
// device 1 at action 1RECV_F0".
ReplayOrder OrderForReplay(const Schedule& schedule);

}  // namespace mp
