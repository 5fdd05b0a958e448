// Reschedule: a plan of S stages, one per device, folded onto K devices
// and given a schedule beyond 1F1B: interleaved-1f1b puts stage s on device
// s mod K (v = S / K stages each, Megatron-LM's looped placement); zb-h1
// keeps one stage per device and splits each backward into I and W. The
// programs come from BuildSchedule and the predictions from simulating them.
//
// This is how mpplan plans those schedules today: it partitions for S
// stages with 1F1B and folds the result, so the partition is the DP's for
// S devices, not yet one chosen jointly with the schedule (issue 26).
#pragma once

#include "planner/plan/plan.h"

namespace mp {

// Throws InputError naming the rule when the plan cannot take the schedule
// (ScheduleRuledOut: M divisible by K for interleaved, S a multiple of K,
// replicas, inference). Where the stages carry no I/W split, I and W are
// each estimated as half of B (a stage whose inputs need no gradient: W is
// all of B), and the plan says so in its warnings.
void Reschedule(Plan& plan, ScheduleKind kind, int devices);

}  // namespace mp
