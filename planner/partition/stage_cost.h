// The cost of running positions [a, e) of a pipeline order as stage s: the
// partitioner's objective and constraint, O(1) per query from prefix sums.
//
//   time(s, a, e)   = speed_s * sum(forward + backward)           compute
//                   + transfers over cut a (in) and cut e (out):  latency +
//                     bytes / bandwidth for activations, and in training for
//                     gradients, each way                          PipeDream's
//                                                                  stage time
//   memory(s, a, e) = static + in_flight_s * activations
//       training:  static = parameter bytes + (1 + optimizer_state_factor) *
//                  the bytes of those with a gradient (weights; gradients
//                  and optimizer state, none for a frozen parameter or a
//                  buffer); activations = the
//                  stage's outputs plus what it receives, stashed per
//                  micro-batch until its backward
//       inference: static = parameter bytes; activations = the most bytes
//                  live at any node of the stage, one micro-batch at a time
//
// Recomputation (training, gpipe, 1f1b and interleaved-1f1b): a stage that
// recomputes keeps, per micro-batch in flight, only what crosses its
// boundaries (what it received, to run its forward again, and what it
// sent), runs its forward again before its backward (time + forward), and
// holds one micro-batch's activations from then until its backward ends.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "planner/partition/cluster.h"
#include "planner/partition/cut_cost.h"
#include "planner/partition/dominance_sum.h"
#include "planner/schedule/schedule.h"

namespace mp {

// Which stages drop their activations after the forward and recompute them
// before the backward (mpplan --recompute): none, those that do not fit
// their device otherwise, or every one. The zero-bubble schedules (zb-h1,
// zbv) keep each micro-batch's graph from I to W and never recompute.
enum class Recompute { kNever, kAuto, kAlways };
std::string RecomputeName(Recompute recompute);     // never | auto | always
Recompute ParseRecompute(const std::string& text);  // InputError naming the text otherwise

struct StageSpec {
  double speed = 1.0;
  int64_t memory_bytes = kUnlimitedMemory;  // what the stage may fill: its share of the device's usable memory
  int64_t device_memory_bytes = kUnlimitedMemory;  // its device's limit, before headroom and chunks (for messages)
  double memory_headroom = 0;                      // its device's (Device::memory_headroom)
  int in_flight = 1;  // micro-batches whose activations the stage holds
  Link in_link;       // from the previous stage
  Link out_link;      // to the next stage
  int replicas = 1;   // copies of the pipeline whose gradients it all-reduces
  Link replica_link;
  // The pipeline's, the same on every stage: PipelineSlowdown of the
  // cluster, for the simulator (stage costs here are each stage alone).
  std::vector<double> slowdown;
  double step_overhead_ms = 0;  // the pipeline's too (Cluster::step_overhead_ms)
  double replica_wait_share = 0;  // the pipeline's too (Cluster::replica_wait_share)
  double optimizer_ms_per_mib = 0;  // its device's (Cluster::optimizer_ms_per_mib times its speed)
  bool split_backward = false;  // the schedule runs I and W (zb-h1, zbv)
  Recompute recompute = Recompute::kNever;  // kNever where the schedule cannot (inference, zb-h1, zbv)
};

// Stage s of `stages` runs on the device StagePlacement gives it (the
// first stages / chunks devices: looped, or zbv's V) and holds as many
// micro-batches as the schedule keeps in flight there. With chunks v > 1 a
// stage may use 1/v of its device's memory, so a device's v stages
// together fit it; its links are LinkBetween its device and its
// neighbours'.
std::vector<StageSpec> StageSpecs(const Cluster& cluster, ScheduleKind schedule, int stages, int microbatches,
                                  int chunks = 1, Recompute recompute = Recompute::kNever);

class StageCostModel {
 public:
  StageCostModel(const OrderCosts& costs, std::vector<StageSpec> stages, double optimizer_state_factor);
  // The same order and prefix sums (shared, not copied) on other stages.
  StageCostModel WithStages(std::vector<StageSpec> stages) const;
  // The same, with each stage's transfers over every cut tabulated (one
  // table per distinct link), which InMs and OutMs then read: for the DP,
  // which asks for each cut's many times over (computing them took a
  // third of a 96-block GPT's DP tables).
  StageCostModel WithTransferTables() const;

  int Positions() const { return n_; }
  int Stages() const { return int(stages_.size()); }
  const StageSpec& Spec(int s) const { return stages_[s]; }
  const OrderCosts& Costs() const { return *costs_; }
  double OptimizerStateFactor() const { return optimizer_state_factor_; }

  double ComputeMs(int s, int a, int e) const { return stages_[s].speed * (sums_->work[e] - sums_->work[a]); }
  // The order's work (forward and backward) before each position, n + 1 of them: ComputeMs's sums.
  const double* WorkSums() const { return sums_->work.data(); }
  double InMs(int s, int a) const;   // transfers over cut a, on the link before stage s
  double OutMs(int s, int e) const;  // transfers over cut e, on the link after stage s
  // Its forward again, where stage s recomputes [a, e); else 0.
  double RecomputeMs(int s, int a, int e) const;
  double StageMs(int s, int a, int e) const {
    return ComputeMs(s, a, e) + InMs(s, a) + OutMs(s, e) + RecomputeMs(s, a, e);
  }

  int64_t StaticBytes(int a, int e) const;
  int64_t ActivationBytes(int a, int e) const;
  // Training: what [a, e)'s backward holds beyond its activations at its
  // most, once whatever is in flight: the gradients that came back, of what
  // it relays, and of what crosses inside it at the position whose backward
  // adds the most (NodeCost::backward_working), less what a whole backward
  // has freed by then (`split`: I frees nothing); 0 in inference (the live
  // peak of ActivationBytes covers it).
  int64_t TransientBytes(int a, int e, bool split) const;
  // Training, a split backward: what [a, e)'s W holds beyond what I left,
  // at its most: one node's weights' gradients before they join .grad (the
  // first stage's W is a whole backward: TransientBytes).
  int64_t WeightTransientBytes(int a, int e) const;
  // Training: the most [a, e)'s forward has live at once (the values
  // crossing the op running, and what it makes); 0 in inference, where
  // ActivationBytes is that peak.
  int64_t ForwardPeakBytes(int a, int e) const { return costs_->training ? PeakLive(a, e) : 0; }
  // Training: of ActivationBytes, what a split backward's I frees (W keeps
  // the graph from the weight readers down: SplitBackward drops the rest
  // with the outputs and the gradients that came for them); 0 for a stage
  // whose inputs take no gradient.
  int64_t FreedByInputBackwardBytes(int a, int e) const;
  // Training: the output bytes of [a, e)'s weight-consuming nodes, the
  // gradients a split backward's I keeps for W per micro-batch; 0 where no
  // input of the stage takes a gradient (planner/graph/split_backward.h).
  int64_t WeightGradientBytes(int a, int e) const;
  // Training: what a recomputing stage holds per micro-batch in flight:
  // what it received and what it sent.
  int64_t BoundaryBytes(int a, int e) const;
  // Whether stage s recomputes [a, e): never, always, or (auto) where the
  // range does not fit the stage's memory otherwise.
  bool Recomputes(int s, int a, int e) const;
  // Stage s's peak with [a, e), recomputing or not.
  int64_t MemoryWith(int s, int a, int e, bool recompute) const;
  int64_t MemoryBytes(int s, int a, int e) const { return MemoryWith(s, a, e, Recomputes(s, a, e)); }
  // The least memory [a, e) can take on stage s, recomputing where allowed
  // (what the smallest limit that fits is made of).
  int64_t LeastMemoryBytes(int s, int a, int e) const;
  // LeastMemoryBytes without what the stage sends and keeps (which may
  // shrink as e passes its last reader): a bound that never decreases with e.
  int64_t MemoryLowerBound(int s, int a, int e) const;
  // Every range fits a stage whose memory cannot bind (MemoryCanBind):
  // its memory is not worked out (here and in Recomputes, the transient's
  // walk over the values crossing e took most of a 96-block GPT's
  // 64-device search).
  bool Fits(int s, int a, int e) const {
    return !MemoryCanBind(s) || MemoryBytes(s, a, e) <= stages_[s].memory_bytes;
  }
  // False when every range of the order fits stage s (its memory bound by
  // the whole model's parameters and every activation cannot exceed the
  // limit), so the limit never constrains that stage.
  bool MemoryCanBind(int s) const { return can_bind_[s]; }

  // Every stage must hold a node that costs time: the smallest end e > a for
  // which [a, e) does, or n + 1 when none is left.
  int FirstUsefulEnd(int a) const { return sums_->first_useful_end[a]; }
  int UsefulNodes() const { return sums_->useful[n_]; }
  int UsefulIn(int a, int e) const { return sums_->useful[e] - sums_->useful[a]; }

 private:
  int64_t PeakLive(int a, int e) const;  // max over positions of live bytes, sparse table
  double CutMs(int cut, const Link& link) const;  // activations and gradients over `cut` on `link`
  // table[k][p] = max of values over [p, p + 2^k), and its range query.
  // Stage s's transient with [a, e): its B's, or the larger of its I's
  // and its W's.
  int64_t StageTransientBytes(int s, int a, int e) const;
  static std::vector<std::vector<int64_t>> SparseMax(const std::vector<int64_t>& values);
  static int64_t RangeMax(const std::vector<std::vector<int64_t>>& table, int a, int e);

  struct Crossing {
    int born = 0;            // where its storage was made (LiveValue::storage_born)
    int64_t bytes = 0;
    int64_t kept_bytes = 0;  // of bytes, what that position keeps
  };
  struct Sums {
    std::vector<double> work;               // prefix sums of forward + backward
    std::vector<double> forward;            // prefix sums of forward
    std::vector<int64_t> params, gradients, outputs, kept, weight_outputs;   // prefix sums
    std::vector<int> useful, first_useful_end;
    std::vector<std::vector<int64_t>> peak; // peak[k][p] = max live over [p, p + 2^k)
    // Training, likewise: of each position's backward working memory and
    // the gradients crossing the cut after it, and of that plus what the
    // positions up to it keep (TransientBytes).
    std::vector<std::vector<int64_t>> transient, transient_freeing;
    std::vector<std::vector<int64_t>> weight_transient;  // of each position's weights' gradients (W)
    int64_t most_backward_working = 0;
    // Training: per cut, the values carrying a gradient that cross it, by
    // birth (TransientBytes takes off what came back and adds back what is
    // sent and kept).
    std::vector<std::vector<Crossing>> crossing;
    int64_t input_bytes = 0;                // model inputs that cross a cut
    // Training: the values no reader keeps, by where they are born and last
    // read, for what a stage receives and sends on unchanged.
    DominanceSum relays;
    // Likewise the values that carry a gradient: what a stage relays in its
    // backward.
    DominanceSum relayed_gradients;
    // Training: what each position keeps, at (position, its next weight
    // reader): what a split backward's I frees.
    DominanceSum kept_by_next_weight_reader;
  };

  // MemoryCanBind for each stage, worked out once its stages are set.
  bool WorkOutCanBind(int s) const;
  void SetCanBind();

  const OrderCosts* costs_;
  std::vector<StageSpec> stages_;
  double optimizer_state_factor_;  // training: state tensors per parameter with a gradient
  int n_;
  std::shared_ptr<const Sums> sums_;
  std::vector<bool> can_bind_;
  // WithTransferTables: per distinct link, each cut's InMs-style transfer
  // time; per stage, its in and out links' tables (else empty).
  std::shared_ptr<const std::vector<std::vector<double>>> cut_ms_;
  std::vector<int> in_table_, out_table_;
};

}  // namespace mp
