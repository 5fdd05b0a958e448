// Profile: what each canonical node costs, measured on a local device or
// estimated from a device profile. Plain values (no LibTorch), shared by
// the profiler that fills it and the partitioner and simulator that read it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "planner/graph/input_spec.h"
#include "planner/profile/band.h"

namespace mp {

// Byte size of one OpGraph value as a function of the micro-batch size m:
// bytes(m) = fixed + per_sample * m (exact for tensors whose batch
// dimension is the micro-batch; lists and tuples sum their tensors).
struct ValueBytes {
  int64_t per_sample = 0;
  int64_t fixed = 0;
};

// One canonical node. Every per-size vector has one entry per
// Profile::microbatch_sizes, in the same order.
struct NodeCost {
  int id = 0;
  std::string kind;                  // aten::conv2d, prim::ListConstruct, ...
  std::string layer;                 // layer2.3.conv1; "" for the root module
  std::vector<double> forward_ms;    // median forward time
  std::vector<double> backward_ms;   // median backward time; 0 in inference profiles
  // Training profiles measured since 2026-11-24: the backward split into
  // the input gradients (zb-h1's I) and the parameter gradients (W), each
  // timed on its own (node_by_node.h). Empty otherwise: InputBackwardMs
  // and WeightBackwardMs estimate them.
  std::vector<double> input_backward_ms;
  std::vector<double> weight_backward_ms;
  std::vector<double> spread;        // (p90 - p10) / median of the forward samples
  std::vector<double> flops;         // FLOP estimate of one forward (0 when not a compute op)
  std::vector<double> bytes_moved;   // bytes read + written by one forward
  int64_t output_bytes_per_sample = 0;  // activation bytes per sample of the micro-batch
  int64_t output_bytes_fixed = 0;       // activation bytes independent of the micro-batch
  int64_t param_bytes = 0;           // bytes of the lifted parameters it reads
  // Training profiles measured on CPU since 2026-11-27: the bytes of what
  // the node's forward allocates that autograd keeps until the backward
  // (node_by_node.cpp, MeasureKept), fixed + per_sample * m. Not measured:
  // the rules of saved_values.h estimate it from the graph.
  std::optional<ValueBytes> kept;
  // Training profiles since 2026-11-28: the gradients its I keeps for its W
  // in the profiler's split passes (SplitBackward::HeldBytes): 0 for a node
  // without both parts. Not measured: its outputs' bytes where it reads a
  // weight (cut_cost.cpp).
  std::optional<ValueBytes> weight_kept;
  // Training profiles on CPU since 2026-11-28, one entry per size: the most
  // the node allocates while it runs, beyond what its forward leaves and
  // beyond what was live before its backward (the gradients it makes
  // included; node_by_node.cpp). Per size, not a line in m: a convolution
  // reorders its weights at some sizes and not at others. Empty where not
  // measured. The planner takes the forward's into a forward's live peak
  // (0 where not measured); the backward's is recorded for a transient
  // model not yet adopted (docs/BENCHMARKS.md, issue 27, fifteenth session).
  std::vector<int64_t> forward_working_bytes;
  std::vector<int64_t> backward_working_bytes;
};

struct Profile {
  std::string fingerprint;           // of the canonical graph that was profiled
  std::vector<TensorSpec> inputs;    // the full-batch input spec
  int64_t batch = 0;
  bool training = false;             // backward times present
  std::string source;                // measured | analytic | calibrated
  std::string device;                // cpu, cuda:0, or a device profile name (A100-80GB)
  int threads = 0;                   // intra-op threads the times were taken with
  int warmup = 0;                    // measured profiles: runs discarded per sample set
  int repeats = 0;                   // measured profiles: samples per median
  std::vector<int64_t> microbatch_sizes;  // ascending, each in [1, batch]
  // Default sizes the model fails at, which were not profiled (BatchNorm in
  // training refuses one value per channel: one sample after global
  // pooling), each with the model's error line. The planner plans no
  // micro-batch below the smallest profiled size where there are any.
  struct LeftOutSize {
    int64_t size = 0;
    std::string why;
  };
  std::vector<LeftOutSize> sizes_left_out;
  std::vector<NodeCost> nodes;       // index = canonical node id
  std::vector<ValueBytes> values;    // index = OpGraph value id
  // Measured profiles: the whole graph in one piece at the largest size,
  // warm, and coverage = sum of per-node forward times / whole forward
  // time there, before the nodes are scaled to it; backward_coverage
  // likewise for the backward. 0 when not measured.
  double whole_forward_ms = 0;
  double whole_backward_ms = 0;
  double coverage = 0;
  double backward_coverage = 0;
  // Measured profiles, one [forward, backward] per size: the factors that
  // scaled its node times to its whole graph's warm run (WholeScale; the
  // backward's is 1 in inference). Empty in profiles from before
  // 2026-11-29, whose sizes are unscaled.
  std::vector<std::vector<double>> whole_scale;
  // Measured profiles: the sizes the planner measured after the rest (its
  // plan's, planner/command/search_measured.h), each with the size of the
  // profile measured again beside it (`anchor`) and the factor its times
  // were scaled by to keep the profile's pace (PaceToAnchor,
  // merge_sizes.h). Empty where no size was added.
  struct PacedSize {
    int64_t size = 0;
    int64_t anchor = 0;
    double pace = 1;
  };
  std::vector<PacedSize> paced_sizes;
  // Measured on CPU for several workers: shared_slowdown[k - 1] is how much
  // slower the whole graph ran with k copies at once (contention between
  // CPU-worker stages; see contention.h), at micro-batch size
  // shared_slowdown_microbatch. Empty when not measured.
  std::vector<double> shared_slowdown;
  int64_t shared_slowdown_microbatch = 0;
  // The same at each of shared_slowdown_sizes (ascending: every profiled
  // size below the batch, or the batch alone), one row of factors per size:
  // contention grows as micro-batches shrink (MobileNetV3 at 1: 1.12-1.25x,
  // at 4: 1.00-1.01x). shared_slowdown is the row at
  // shared_slowdown_microbatch, the largest of them. Empty in profiles from
  // before 2026-11-24: shared_slowdown serves every size.
  std::vector<int64_t> shared_slowdown_sizes;
  std::vector<std::vector<double>> shared_slowdown_by_size;
  // The same rows with the probe's copies as processes (copies.h), as
  // mpexec runs a plan with replicas, one process per device: the search
  // charges such a plan these. Two threads of one process slowed each
  // other more than two processes did (the ConvNet 1.22-1.34x against
  // 1.04-1.15x). Measured where the plan may replicate; empty elsewhere,
  // and in profiles from before 2026-12-06: shared_slowdown_by_size
  // serves replicas too.
  std::vector<std::vector<double>> process_slowdown_by_size;
  // How far the probe's turns strayed from their factor (SharedSlowdown),
  // and how many turns the factor is the median of. Empty and 0 in
  // profiles from before 2026-11-24.
  Band shared_slowdown_band;
  int shared_slowdown_turns = 0;
  // Measured with shared_slowdown where CPU workers are pinned to cores of
  // their own (MP_PIN_CPUS=1, common/cpu_affinity.h): worker_speed[w] is
  // how much longer the whole graph took on worker w's cores than on worker
  // 0's, where the node passes ran (1 for worker 0). Reported, not charged
  // (docs/profile.md: the faster core moved between profile and run).
  // Empty when not measured.
  std::vector<double> worker_speed;
  // Measured with shared_slowdown: one message from a CPU-worker stage to
  // the next, queued and its sleeping receiver woken (see handoff.h). The
  // planner's latency for links between CPU workers. 0 when not measured.
  double handoff_ms = 0;
  // Measured on CPU for plans whose ranks are processes (mpplan
  // --processes, or --replicas other than 1): a boundary message between
  // stages in two processes, and a hop of the all-reduce between replicas,
  // over Gloo on loopback, as latency + bytes / bandwidth (the executor's
  // link_probe.h). Zero when not measured.
  struct ProbedLink {
    double latency_ms = 0;
    double bytes_per_s = 0;  // 0: no measurable cost per byte
    bool Measured() const { return latency_ms > 0 || bytes_per_s > 0; }
  };
  ProbedLink process_link, allreduce_link;
  // Measured with allreduce_link in training: the model's own gradients
  // summed over two ranks right after each had run a training step of the
  // model at `microbatch` samples (allreduce_after_step.h), as mpexec's
  // replicas sum them: `ms` from the later rank's readiness, for `bytes`.
  // A step leaves the sum slower than allreduce_link's probe (after 1 ms
  // of spinning) reads it: the GPT's 7.4 MB ran 27-32% over the probe's
  // line in mpexec over four sessions. The planner scales the link by
  // AllReduceAfterStepFactor, never below 1. Zero in profiles from before
  // 2026-11-29.
  // Beside the sum, what a replica waits for the other before it: `gap_ms`,
  // how far apart the two ranks' steps ended, and `round_ms`, a round of
  // step and sum from the later readiness to the next (middle means; 0 in
  // profiles from before 2026-12-06). A round pays the ranks' mean step and
  // sum plus half the gap: ReplicaWaitShare.
  struct AllReduceAfterStep {
    int64_t bytes = 0;
    double ms = 0;
    int64_t microbatch = 0;
    double gap_ms = 0;
    double round_ms = 0;
    bool Measured() const { return bytes > 0 && ms > 0; }
  };
  AllReduceAfterStep allreduce_after_step;
  // Measured on CPU: mpexec's fixed cost per step, [k - 1] with k workers
  // (see step_overhead.h). Empty when not measured.
  std::vector<double> step_overhead_ms;
  // Measured profiles: the noise they were taken in. pass_band: [p25, p75]
  // of the kept passes' totals (every node's forward and backward), each
  // over the median at its size, pooled over the sizes. reference_ms: the
  // median of the drift reference (drift_reference.h), timed before every
  // kept pass; reference_band its samples' band. 0 and empty when not
  // measured.
  Band pass_band;
  double reference_ms = 0;
  Band reference_band;
  // Measured profiles: the factor every node's times were scaled by so that
  // they add up to the passes' median total rather than fall short of it
  // (pass_scale.h). 0 in profiles from before 2026-11-27 (unscaled).
  double pass_scale = 0;
  // Measured training profiles: what adding a micro-batch's parameter
  // gradients into .grad costs, in ms per MiB of parameters, timed in the
  // profile's passes (node_by_node.cpp). Every micro-batch of a step after
  // the first pays it (cut_cost.cpp). 0 in profiles from before 2026-11-27.
  double accumulate_ms_per_mib = 0;
  // Measured training profiles: the optimizer's step after a step's last
  // backward, by the optimizer's name (sgd, momentum, adam, adamw), in ms
  // per MiB of parameters with a gradient, timed on the model's own
  // (optimizer_rate.h). A device steps its stages' parameters once its
  // list (and any all-reduce) is done; the step ends after the last does.
  // Empty in profiles from before 2026-12-05 (the step not charged).
  std::map<std::string, double> optimizer_ms_per_mib;
  // Measured with it on CPU for several workers: [k - 1], how much slower
  // each of k workers steps its share of the parameters when all k step at
  // once (they share the memory bandwidth; the MLP's adam at 2: 1.5x).
  // Empty when not measured.
  std::vector<double> optimizer_slowdown;
  // Measured profiles: what timing a node alone added to each sample, taken
  // off every node's times (node_overhead.h): [forward per call, forward
  // per fresh leaf, backward per autograd call] in ms. Empty in profiles
  // from before 2026-11-28 (nothing taken off).
  std::vector<double> node_overhead;
};

// shared_slowdown[k - 1] for micro-batches of `microbatch` samples:
// interpolated linearly between the sizes it was measured at, the nearest
// row beyond them; shared_slowdown itself where no sizes were measured.
// With `processes` (a plan whose devices are processes: replicas), the
// rows of process_slowdown_by_size where it has them.
std::vector<double> SharedSlowdownAt(const Profile& profile, int64_t microbatch, bool processes = false);

// optimizer_ms_per_mib for `optimizer` (sgd, momentum, adam, adamw); 0
// where the profile has none.
double OptimizerMsPerMib(const Profile& profile, const std::string& optimizer);

// What a ring of two over allreduce_link charges for `bytes` (two hops of
// half the bytes, AllReduceMs in partition/cluster.h).
double ProbedAllReduceMs(const Profile::ProbedLink& link, int64_t bytes);

// The share of a step that `replicas` replicas' steps add by waiting for
// the latest of them before each sum: half allreduce_after_step's gap over
// its round for two (the later of two steps is their mean plus half their
// gap), and for more the expected latest of that many, as if the ranks'
// times were normal with the spread the gap of two shows (for two, the
// same). 0 for one replica, or where the gap was not measured.
double ReplicaWaitShare(const Profile& profile, int replicas);

// allreduce_after_step's time over what allreduce_link charges for its
// bytes: how much slower the sum runs after a step of this model than the
// probe's line says. 1 where either was not measured.
double AllReduceAfterStepFactor(const Profile& profile);

// The band of every prediction of a plan of `stages` stages made from
// `profile` (band.h): the ranking band below; for plans of several stages
// the contention band narrowed to a median of its turns (the factor that
// slows stages computing at once is that median; the whole band is
// charged, though only the time stages overlap pays the factor: an upper
// bound); and the reference band as one draw (the machine's speed at the
// run is one moment of it, not a median: how much it moves between the
// profile and the run); combined. Empty for profiles not measured here.
Band PredictionBand(const Profile& profile, int stages);

// The part of that band the search reads as noise between two
// alternatives planned from one profile: the pass band narrowed to a
// median of `repeats` passes. (The machine's speed at the run moves every
// alternative alike; the contention band, charged whole, made tie windows
// of 20% and plans that gave up as much.)
Band RankingBand(const Profile& profile);

// Piecewise-linear interpolation of ys (one per `sizes`, ascending) at m.
// m must lie within [sizes.front(), sizes.back()]: a profile does not
// extrapolate, because small micro-batches do not scale linearly.
double InterpolateAt(const std::vector<int64_t>& sizes, const std::vector<double>& ys, int64_t m);

// True when m lies within the measured micro-batch sizes.
bool CanInterpolate(const Profile& profile, int64_t m);

double ForwardMs(const Profile& profile, int node, int64_t microbatch);
double BackwardMs(const Profile& profile, int node, int64_t microbatch);
// A node's I and W: measured where the profile has them; else a node that
// reads parameters splits its backward in halves and any other is all I.
double InputBackwardMs(const Profile& profile, int node, int64_t microbatch);
double WeightBackwardMs(const Profile& profile, int node, int64_t microbatch);
int64_t OutputBytes(const Profile& profile, int node, int64_t microbatch);
// NodeCost::kept and weight_kept at m (0 where not measured).
int64_t KeptBytes(const Profile& profile, int node, int64_t microbatch);
int64_t WeightKeptBytes(const Profile& profile, int node, int64_t microbatch);
// NodeCost::forward_working_bytes and backward_working_bytes at m
// (interpolated between sizes); -1 where not measured.
int64_t ForwardWorkingBytes(const Profile& profile, int node, int64_t microbatch);
int64_t BackwardWorkingBytes(const Profile& profile, int node, int64_t microbatch);
int64_t ValueBytesAt(const Profile& profile, int value, int64_t microbatch);

// Micro-batch sizes as --microbatch-sizes takes them: "1,8,32".
std::string SizeList(const std::vector<int64_t>& sizes);

}  // namespace mp
