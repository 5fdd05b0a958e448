// Partition: the plain result of cutting a pipeline order into stages, what
// the plan writer, the reports and the executor read. Every partitioner (the
// DP and the baselines) yields stage bounds; MakePartition turns bounds into
// stages with their nodes, cut tensors, times and memory, and
// SimulatePartition times it under a schedule.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "planner/partition/stage_cost.h"
#include "planner/schedule/simulator.h"

namespace mp {

struct CutTensor {
  int value = 0;  // OpGraph value id
  int peer = 0;   // the stage it comes from (receives) or goes to (sends)
  int64_t bytes = 0;  // at the micro-batch size
  bool carries_gradient = false;  // its gradient travels back in training
};

struct Stage {
  int index = 0;
  int device = 0;                  // index into Cluster::devices
  std::vector<int> nodes;          // canonical ids, in pipeline order
  std::vector<CutTensor> receives; // from stage index - 1 (relayed values included)
  std::vector<CutTensor> sends;    // to stage index + 1
  double forward_ms = 0;           // one micro-batch on its device
  double backward_ms = 0;
  // zb-h1's I and W; a first stage's I is 0 and its W its whole backward
  // (no gradient leaves it: the runtime runs one backward into its weights).
  double input_backward_ms = 0;
  double weight_backward_ms = 0;
  double transfer_ms = 0;          // its sends and receives, both directions
  double cost_ms = 0;              // forward + backward + transfer (+ recompute): the DP's objective
  int64_t param_bytes = 0;
  int64_t gradient_bytes = 0;      // training: of param_bytes, those with a gradient (not frozen, not buffers)
  double allreduce_ms = 0;         // training with replicas: its gradients among them
  double optimizer_ms = 0;         // training: the optimizer's step on its parameters, after the all-reduce
  int64_t static_bytes = 0;        // parameters (+ gradients, optimizer state in training)
  int64_t activation_bytes = 0;    // per micro-batch held (recomputing: what crosses its boundaries)
  // Recomputation: the stage runs its forward again before each backward
  // (recompute_ms, its forward time) and holds one micro-batch's
  // activations (recomputed_bytes) from then until the backward ends.
  bool recompute = false;
  double recompute_ms = 0;
  int64_t recomputed_bytes = 0;
  // Once: what its backward holds beyond its activations at its most
  // (StageCostModel::TransientBytes), and what it would as a whole
  // backward (RunWhole).
  int64_t transient_bytes = 0;
  int64_t whole_transient_bytes = 0;
  int64_t weight_transient_bytes = 0;  // split backward: at its W (StageCostModel::WeightTransientBytes)
  int64_t received_bytes = 0;      // training: what it receives, part of activation_bytes (StageMemory's)
  int64_t sent_gradient_bytes = 0;  // training: the gradients it sends back (StageMemory's)
  int64_t forward_peak_bytes = 0;  // training: the most its forward has live at once (StageMemory's)
  int64_t freed_by_i_bytes = 0;    // split backward: of activation_bytes, what its I frees (StageMemory's)
  int64_t weight_gradient_bytes = 0;  // zb-h1, zbv: kept from I until W per micro-batch (0 otherwise)
  // A split schedule's stage that runs B instead of I then W, where the
  // split costs more than its W fills (search.cpp, ChooseWholeBackward).
  bool whole_backward = false;
  int in_flight = 1;               // micro-batches held at once under the schedule
  int64_t peak_memory_bytes = 0;   // static + in_flight * activation + transient (+ recomputed)
  int64_t memory_limit_bytes = kUnlimitedMemory;
  bool fits = true;
};

struct Partition {
  std::string method;              // dp | uniform | params | block | layers
  // dp: the baseline (uniform, params or block) whose cut the search kept
  // because it simulates faster than the DP's own; "neighbour" when moving
  // the DP's boundaries by a node or more simulated faster, "block+neighbour"
  // when it moved a baseline's; "": the DP's cut.
  std::string cut;
  bool training = false;
  ScheduleKind schedule = ScheduleKind::kGPipe;
  int chunks = 1;                  // stages per device (interleaved-1f1b: v, zbv: 2); placed by StagePlacement
  int microbatches = 1;
  int64_t microbatch_size = 0;
  std::vector<int> order;          // the pipeline order that was cut
  std::vector<int> bounds;         // stages + 1 positions into order
  std::vector<Stage> stages;
  std::vector<TransferTimes> transfers;  // per boundary, for the simulator
  std::vector<double> slowdown;          // the simulator's contention table (StageSpec::slowdown)
  double step_overhead_ms = 0;           // the runtime's per step (StageSpec::step_overhead_ms)
  double replica_wait_share = 0;         // the replicas' wait (StageSpec::replica_wait_share)
  double bottleneck_ms = 0;        // max Stage::cost_ms
  bool fits = true;                // every stage within its device's memory
};

// Builds the stages for `bounds` (0 = b0 < ... < bK = n, K = model.Stages()).
// With `listed` false the partition's order and its stages' nodes,
// receives and sends stay empty (the search lists them only for the
// partition it keeps: the tensors cost O(values) a cut, and copying the
// nodes for each of a 10,000-node chain's 5,700 alternatives a tenth of
// its search). Throws InternalError for malformed bounds.
Partition MakePartition(const StageCostModel& model, const std::vector<int>& bounds, const std::string& method,
                        ScheduleKind schedule, int microbatches, bool listed = true, int chunks = 1);

// Stage s of a split schedule runs B for each I and no W (whole_backward);
// B keeps nothing for a W.
void RunWhole(Partition& partition, size_t s);

// `partition` (unlisted: the search's) with bound i moved to `to`: the two
// stages it divides made again, each running B where it did, and the
// transfers over the bound. Equal to MakePartition of the new bounds with
// the same stages running B (RunWhole), without making the other stages
// again (RefineCut moves one bound of up to 16 stages at a time). Throws
// InternalError for a listed partition or a bound out of range.
Partition MoveBound(const StageCostModel& model, const Partition& partition, size_t i, int to);

// Fills the partition's order, every stage's nodes, and its receives and
// sends by liveness over `costs`.
void ListStages(Partition& partition, const OrderCosts& costs);

// Simulates one step of the partition under its schedule.
SimResult SimulatePartition(const Partition& partition);
// The same with its lists given (PartitionSchedule).
SimResult SimulatePartition(const Partition& partition, const Schedule& schedule);

// The step's times only (SimulateStep without memory), on `lists`, the
// lists of the partition's shape (BuildSchedule of its schedule, devices,
// micro-batches and chunks: not PartitionSchedule's), and their `order`
// (OrderForReplay). A whole_backward stage's I takes its B's time there
// and its W none, which times the step as its own lists do (its B sends
// what its I sends, and a W of no time moves nothing). So the search,
// whatever the cut and whichever stages run B, builds each shape's lists
// and their order once (building them per simulation was a fifth of a
// search). `give_up_at_ms`: SimulateStep's (step_ms infinity where the
// step surely reaches it).
SimResult PartitionStepTimes(const Partition& partition, const Schedule& lists, const ReplayOrder& order,
                             double give_up_at_ms = std::numeric_limits<double>::infinity());

// The action lists the partition runs: its schedule's, with B for I and no
// W on its whole_backward stages.
Schedule PartitionSchedule(const Partition& partition);

// The bounds of an assignment given as the stage of each position (which
// must be nondecreasing from 0 with no gaps); throws InternalError otherwise.
std::vector<int> BoundsFromStages(const std::vector<int>& stage_of_position);

}  // namespace mp
