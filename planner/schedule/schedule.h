// Pipeline schedules: for K devices, v stages per device and M micro-batches,
// each device's ordered list of actions (compute and transfers) over its
// stages, the same lists the simulator times and the executor runs. Kinds:
// gpipe (fill-drain), 1f1b (PipeDream-flush), interleaved-1f1b (Megatron-LM's
// looped virtual stages), zb-h1 (zero bubble with 1F1B's memory: the
// backward split into I and W), zbv (zero bubble on two V-placed stages per
// device), dualpipev (DeepSeek's DualPipeV on zbv's V) and forward
// (inference). ValidateSchedule proves a list set can run.
#pragma once

#include <string>
#include <vector>

#include "planner/schedule/action.h"

namespace mp {

enum class ScheduleKind { kGPipe, kOneFOneB, kForwardOnly, kInterleaved1F1B, kZeroBubbleH1, kZeroBubbleV, kDualPipeV };

// "gpipe", "1f1b", "forward", "interleaved-1f1b", "zb-h1", "zbv", "dualpipev";
// ParseScheduleKind also accepts "forward_only" and "infer", and
// torch.distributed.pipelining's class names (ScheduleGPipe, Schedule1F1B,
// ScheduleInterleaved1F1B, ScheduleInterleavedZeroBubble as zb-h1 at one
// stage per device, ScheduleZBVZeroBubble, ScheduleDualPipeV), and throws InputError naming
// the text otherwise.
std::string ScheduleName(ScheduleKind kind);
ScheduleKind ParseScheduleKind(const std::string& text);
// The training kinds' names, for messages: "gpipe, 1f1b, ... or dualpipev".
std::string TrainingScheduleNames();

bool IsTraining(ScheduleKind kind);  // every kind but forward runs backwards
bool SplitsBackward(ScheduleKind kind);  // runs I and W instead of B (dualpipev: in part)
bool IsV(ScheduleKind kind);  // zbv, dualpipev: two stages a device, in a V
// The stages per device a plan of this kind runs: interleaved-1f1b's
// `requested` (0: 2), zbv's and dualpipev's 2, the others' 1.
int ChunksFor(ScheduleKind kind, int requested);

// [stage] -> device for K devices of `chunks` stages each: stage s on
// device s mod K (looped: gpipe, 1f1b, zb-h1, interleaved-1f1b), or for
// zbv and dualpipev the V (device d holds stages d and 2K - 1 - d, so the
// middle boundary stays on device K - 1).
std::vector<int> StagePlacement(ScheduleKind kind, int devices, int chunks);

struct Schedule {
  ScheduleKind kind = ScheduleKind::kGPipe;
  int stages = 1;        // K·v: every stage runs on one device
  int microbatches = 1;
  std::vector<std::vector<Action>> actions;  // [device] -> ordered actions of its stages
  // [stage] -> its device (an index into actions, StagePlacement); empty:
  // stage s on device s, one stage per device.
  std::vector<int> stage_device;

  int Devices() const { return int(actions.size()); }
  int DeviceOf(int stage) const { return stage_device.empty() ? stage : stage_device.at(stage); }
};

// Builds the lists for `devices` devices of `chunks` stages each, placed
// by StagePlacement, with transfers inserted (also between two stages of
// one device): a RECV right before the compute that needs it, a SEND right
// after the compute that made it. Throws InputError naming the rule for a
// kind that cannot take these numbers (ScheduleRuledOut).
Schedule BuildSchedule(ScheduleKind kind, int devices, int microbatches, int chunks = 1);

// A split schedule where the stages `whole[s]` run B in place of each I and
// drop their W: a stage whose I + W costs more than its B and whose W
// fills no bubble worth it (the planner's choice, search.cpp).
Schedule WithWholeBackward(Schedule schedule, const std::vector<bool>& whole);

// Why `kind` cannot run K devices x v chunks x M micro-batches, or "" when
// it can (the search's reason for ruling it out): devices or micro-batches
// below 1; interleaved-1f1b with v < 2, one device or M not a multiple of
// K; zbv and dualpipev with v other than 2 or one device, dualpipev with
// M < 2K; v > 1 for the others.
std::string ScheduleRuledOut(ScheduleKind kind, int devices, int microbatches, int chunks);

// The compute actions of one list only (F/B/I/W), in schedule order.
std::vector<Action> ComputeActions(const std::vector<Action>& list);

// The most micro-batches whose activations each stage holds at once (from F
// until its B, or its W), from the lists themselves: M for gpipe, K - s for
// 1f1b, 1 for forward.
std::vector<int> MicrobatchesInFlight(const Schedule& schedule);
// The same for BuildSchedule(kind, devices, microbatches, chunks), without
// building its lists (the search asks for every shape it plans; building
// them was a tenth of a 10,000-node chain's search).
std::vector<int> MicrobatchesInFlight(ScheduleKind kind, int devices, int microbatches, int chunks = 1);

// Throws InputError naming the device, the step and the action of the first
// problem, followed by the schedule grid around it: an action on a stage
// of another device, a micro-batch out of range, a missing or repeated
// F/B/I/W, B mixed with I/W for one micro-batch, a B or I before its F, a W
// before its I, a compute before the RECV it needs, a SEND before the
// compute that makes its tensor, a SEND without the matching RECV on the
// peer stage (or vice versa), or a deadlock: some device waits on a RECV
// whose SEND can never run (sends are asynchronous, receives block, as in
// batch_isend_irecv).
void ValidateSchedule(const Schedule& schedule);

// The lists as torch.distributed.pipelining's _format_pipeline_order prints
// them: one column per device, one row per step, steps [from, to) only
// (clamped); compute actions and transfers alike.
std::string FormatScheduleGrid(const Schedule& schedule, int from = 0, int to = 1 << 30);

}  // namespace mp
