// Plan: the contract between mpplan and mpexec, as plain values. One Plan is
// one YAML file (format mpplan/v2, docs/plan-format.md; v1 files are still
// read): which model, which inputs, how the batch is split, which canonical
// nodes run in which stage on which device, the action list each device runs
// over its stages, and what the planner predicted.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "planner/graph/input_spec.h"
#include "planner/schedule/schedule.h"
#include "planner/schedule/simulator.h"

namespace mp {

constexpr const char* kPlanFormat = "mpplan/v2";
// The first format: one action list per stage, in stages[].actions.
constexpr const char* kPlanFormatV1 = "mpplan/v1";

struct PlanModel {
  std::string path;               // relative to the plan file's directory (or absolute)
  std::string sha256;             // of the model file's bytes
  std::string graph_fingerprint;  // of the canonical graph
  int nodes = 0;                  // canonical node count
};

struct PlanDevice {
  int id = 0;
  std::string type;               // cpu | cuda
  int index = 0;                  // cuda:index; CPU workers count from 0
  std::string name;               // H100-SXM, cpu
  int64_t memory_bytes = 0;       // the limit the plan was made under; 0: none
  double speed = 1;               // time multiplier relative to the profiled device
  double memory_headroom = 0;     // the share of memory_bytes the plan left free (mpplan --memory-headroom)
};

// The link between stage s and s + 1 (plans store one per boundary).
struct PlanLink {
  double bandwidth_bytes_per_s = 0;  // 0: free
  double latency_ms = 0;
};

// A value crossing a stage boundary, per micro-batch.
struct PlanTensor {
  std::string value;              // OpGraph value name (IR debug name)
  int value_id = 0;               // OpGraph value id
  int peer = 0;                   // the stage it comes from or goes to
  std::string dtype;
  std::vector<int64_t> shape;     // at the micro-batch size; empty for non-tensors
  int64_t bytes = 0;
  bool gradient = false;          // its gradient travels back in training
};

using NodeRange = std::pair<int, int>;  // inclusive [first, last]

struct PlanStage {
  int id = 0;
  int device = 0;                 // index into Plan::devices
  int program = 0;                // index into Plan::programs: the list that runs it (not stored)
  std::vector<int> replica_devices;  // with replicas: replica r's copy runs on [r]; [0] == device
  std::vector<NodeRange> nodes;   // canonical ids, ascending, disjoint, not adjacent
  std::vector<std::string> layers;  // layer names in pipeline order (top two levels)
  int64_t param_count = 0;
  int64_t param_bytes = 0;
  std::vector<PlanTensor> receives;
  std::vector<PlanTensor> sends;
  // Predictions for one micro-batch on this stage's device.
  double forward_ms = 0;
  double backward_ms = 0;
  double input_backward_ms = 0;   // I and W, for schedules that split the backward
  double weight_backward_ms = 0;
  double send_ms = 0;             // its activations to stage id + 1
  double send_gradients_ms = 0;   // its input gradients to stage id - 1
  double busy_fraction = 0;       // busy / step time
  double allreduce_ms = 0;        // with replicas, training: its gradients among them, once a step
  // Training: the plan's optimizer's step on its parameters with a
  // gradient, once a step, after its device's list and all-reduces. 0 in
  // plans written before 2026-12-05, or from profiles without the rate.
  double optimizer_ms = 0;
  int64_t static_bytes = 0;       // parameters (+ gradients and optimizer state in training)
  // Training: the gradients static_bytes holds, as many optimizer state
  // tensors each (Plan::optimizer_state_factor): the parameters it holds
  // that are not frozen (a buffer has none either).
  int64_t gradient_bytes = 0;
  int64_t activation_bytes = 0;   // held per micro-batch in flight (recomputing: what crosses its boundaries)
  // Recomputation (training; gpipe, 1f1b, interleaved-1f1b): the stage
  // keeps only its boundary values after each forward and runs the forward
  // again, with the same random draws, before the backward: its B takes
  // forward_ms more, and holds recomputed_bytes (one micro-batch's
  // activations) until it ends.
  bool recompute = false;
  int64_t recomputed_bytes = 0;
  int64_t transient_bytes = 0;    // once, training: what its B or I holds beyond its activations at its most
  // zb-h1, zbv: what its W holds beyond what I left (-1: transient_bytes,
  // as plans before it was written had it).
  int64_t weight_transient_bytes = -1;
  int64_t forward_peak_bytes = 0; // training: the most one micro-batch's forward has live at once
  int64_t freed_by_i_bytes = 0;   // zb-h1, zbv: of activation_bytes, what I frees
  int64_t weight_gradient_bytes = 0;  // zb-h1, zbv: kept from I until W per micro-batch
  int64_t peak_memory_bytes = 0;
};

// One device's program: the ordered actions of all its stages, in the
// action grammar of torch.distributed.pipelining. With replicas, replica r
// runs the same program on its copy of each stage.
struct PlanProgram {
  int device = 0;                 // index into Plan::devices (replica 0's)
  std::vector<Action> actions;
};

struct PlanPrediction {
  double step_ms = 0;
  double bottleneck_ms = 0;
  double bubble_fraction = 0;
  double samples_per_s = 0;
  double one_device_step_ms = 0;  // the whole batch on one device (K = 1, M = 1)
  double speedup_vs_one_device = 0;
  double allreduce_ms = 0;        // with replicas: the slowest stage's gradient all-reduce
  double optimizer_ms = 0;        // training: the optimizer's step on the device that takes longest (in step_ms)
  // The error band of step_ms (band.h): [low, high] ms; both 0 when the
  // profile carries none (a device profile's estimates).
  double step_low_ms = 0;
  double step_high_ms = 0;
  // Per program (a device that runs stages), in programs' order: the
  // simulated peak of its stages' parameters, gradients and optimizer state
  // with the activations they hold at once under the schedule. Empty in
  // plans written before it.
  std::vector<int64_t> device_peak_memory_bytes;
};

struct PlanProfile {
  std::string source;             // measured | analytic | calibrated
  std::string device;             // cpu, cuda:0, A100-80GB
  std::string file;               // --profile-in, or ""
  int threads = 0;
  std::vector<int64_t> microbatch_sizes;
  double coverage = 0;            // measured: sum of node times / whole-graph time
  double backward_coverage = 0;
  std::string calibration;        // how an analytic profile was calibrated, or ""
  // CPU workers sharing this machine: [k - 1] = how much slower k workers
  // compute at once (measured; the simulator slows an action while others
  // overlap it, the stage times above are each stage alone). Empty for
  // separate devices.
  std::vector<double> shared_slowdown;
  // Measured profiles: the drift reference's median time when profiled
  // (drift_reference.h); mpexec times it again to rescale the prediction.
  double reference_ms = 0;
  // The runtime's fixed cost per step (Cluster::step_overhead_ms at this
  // plan's worker count), in the simulated step. 0: none.
  double step_overhead_ms = 0;
  // With replicas: the share of the step their wait for the latest before
  // each sum adds (Cluster::replica_wait_share), in the simulated step. 0: none.
  double replica_wait_share = 0;
};

// What the search minimises (mpplan --objective): the step, or the device
// time a step costs (step x devices: the inverse of the samples per second
// each device gives), for a user who pays per device.
enum class Objective { kStep, kThroughputPerDevice };

// One (K, M, schedule) the planner weighed: an alternative the search
// tried (Plan::alternatives), or a row of --explain's comparison, a
// baseline partitioner or a user split next to the chosen plan
// (Plan::comparisons).
struct PlanCandidate {
  std::string method;             // comparisons: dp | uniform | params | block | layers
  std::string split;              // layers: the user's split text
  int stages = 0;
  int chunks = 1;                 // stages per device: the devices are stages / chunks
  int replicas = 1;               // data-parallel copies of the pipeline, each on stages / chunks devices
  int microbatches = 0;
  int64_t microbatch_size = 0;
  ScheduleKind schedule = ScheduleKind::kGPipe;
  bool feasible = false;
  std::string why_not;            // when infeasible
  double step_ms = 0;             // simulated; a lower bound when !simulated
  bool simulated = false;         // false for a feasible alternative whose
                                  // lower bound already exceeded the tie window
  double bubble_fraction = 0;
  double bottleneck_ms = 0;
  int64_t peak_memory_bytes = 0;  // the largest stage's
  int recomputing = 0;            // stages that recompute their activations (--recompute)
  // Simulated, and predicted within the tie window of the fastest: the two
  // cannot be told apart, and the simplest of the ties is chosen.
  bool tie = false;
  // Of the previous plan's shape (mpplan --previous: replicas, stages,
  // chunks, micro-batches and schedule), which the search keeps while it
  // stays a tie (search.h).
  bool previous = false;
  // What the search would have chosen without the previous plan: set only
  // where it kept the previous plan's shape instead.
  bool fresh = false;
};

struct Plan {
  std::string format = kPlanFormat;
  PlanModel model;
  std::vector<TensorSpec> inputs;  // full batch
  bool training = true;            // mode: train | infer
  int64_t batch = 0;               // the whole step's, over every replica
  // Data-parallel copies of the pipeline (mpplan --replicas): replica r runs
  // samples [r * batch / R, (r + 1) * batch / R) through its own copy of the
  // stages, and each stage's gradients are all-reduced among its copies
  // over replica_link before the optimizer steps.
  int replicas = 1;
  PlanLink replica_link;
  int microbatches = 1;            // per replica
  int64_t microbatch_size = 0;     // ceil(batch / replicas / microbatches); the last may be smaller
  ScheduleKind schedule = ScheduleKind::kGPipe;
  std::string partitioner = "dp";  // dp | uniform | params | block | layers
  std::string split;               // the --split text when partitioner is layers
  // partitioner dp: uniform, params or block when that baseline's cut
  // simulated faster than the DP's own and the search kept it; neighbour
  // when a boundary of the DP's cut moved a node or more simulated faster
  // (block+neighbour: of that baseline's cut); "" otherwise.
  std::string cut;
  Objective objective = Objective::kStep;  // written when not the step
  // Training: the optimizer the memory plan holds the state of (mpplan
  // --optimizer: sgd, momentum, adam or adamw), which mpexec runs unless
  // told otherwise; "" in a plan older than the key. optimizer_state_factor
  // is its state tensors per parameter with a gradient.
  std::string optimizer;
  double optimizer_state_factor = 2;
  std::vector<PlanDevice> devices;
  std::vector<PlanLink> links;     // one per boundary (stages - 1)
  std::vector<PlanStage> stages;
  std::vector<PlanProgram> programs;  // one per device that runs stages
  PlanPrediction predicted;
  PlanProfile profile;
  std::vector<PlanCandidate> alternatives;
  std::vector<PlanCandidate> comparisons;  // --explain: baselines and a user split
  std::vector<std::string> warnings;
};

// Sorted node ids -> inclusive ranges, and back.
std::vector<NodeRange> ToRanges(std::vector<int> nodes);
std::vector<int> FromRanges(const std::vector<NodeRange>& ranges);

// stage_of_node[id] for every canonical node; -1 where no stage has it.
std::vector<int> StageOfNode(const Plan& plan);

// ceil(batch / microbatches): the size of every micro-batch but the last.
int64_t MicrobatchSize(int64_t batch, int microbatches);

// The last micro-batch's samples: batch - (M - 1) * MicrobatchSize.
int64_t LastMicrobatchSize(int64_t batch, int microbatches);

// True when `microbatches` micro-batches of MicrobatchSize(batch, M) samples
// each leave the last one at least one sample (10 in 7 would need 2+2+2+2+2+0).
bool MicrobatchesSplit(int64_t batch, int microbatches);

// The samples each replica runs: batch / replicas.
int64_t ReplicaBatch(const Plan& plan);

// Stages each device runs: 1, interleaved-1f1b's v or zbv's 2 (stages / programs).
int StagesPerDevice(const Plan& plan);

// The state tensors `optimizer` keeps per parameter with a gradient: sgd
// 0, momentum (SGD with momentum) 1, adam and adamw 2; -1 for another name.
int OptimizerStateTensors(const std::string& optimizer);

// The parameters' own bytes in a stage's static_bytes (each parameter on
// the first stage that reads it): the rest is, in training, the gradients
// (gradient_bytes) and their optimizer_state_factor state tensors each.
int64_t StageParameterBytes(const Plan& plan, const PlanStage& stage);

// The devices an alternative uses: its replicas times its stages over its
// stages per device.
int Devices(const PlanCandidate& a);

std::string ObjectiveName(Objective objective);  // step | throughput-per-device
// What `objective` multiplies an alternative's step by: 1, or its devices.
double RankFactor(const PlanCandidate& a, Objective objective);
// The alternative's value under `objective`, in ms (device-ms per step for
// throughput per device): step_ms x RankFactor. Lower is better.
double RankMs(const PlanCandidate& a, Objective objective);
// A copy of `a` whose step_ms is its RankMs: for the rules that compare
// steps (ChooseOnFewestDevices, Outclassed, KeepsPrevious) to compare ranks.
PlanCandidate Ranked(const PlanCandidate& a, Objective objective);

// The ids of the stages program `program` runs, comma-separated: "0,2".
std::string ProgramStages(const Plan& plan, int program);

// The schedule the plan's action lists form (kind, K, M and the lists).
Schedule PlanSchedule(const Plan& plan);

// Replays the plan's action lists with its per-stage predictions: the same
// simulation the planner ran, for reports and for measured-vs-predicted.
SimResult SimulatePlan(const Plan& plan);

}  // namespace mp
