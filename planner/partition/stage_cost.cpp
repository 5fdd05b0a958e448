// Prefix sums and a sparse table over an OrderCosts, so that every stage
// cost the partitioner asks for is O(1). See stage_cost.h for the model.
#include "planner/partition/stage_cost.h"

#include <algorithm>

#include "common/error.h"
#include "planner/schedule/simulator.h"

namespace mp {

std::string RecomputeName(Recompute recompute) {
  switch (recompute) {
    case Recompute::kNever: return "never";
    case Recompute::kAuto: return "auto";
    case Recompute::kAlways: return "always";
  }
  return "never";
}

Recompute ParseRecompute(const std::string& text) {
  for (Recompute r : {Recompute::kNever, Recompute::kAuto, Recompute::kAlways}) {
    if (text == RecomputeName(r)) return r;
  }
  throw InputError(Concat("recompute '", text, "': expected never, auto or always"));
}

std::vector<StageSpec> StageSpecs(const Cluster& cluster, ScheduleKind schedule, int stages, int microbatches,
                                  int chunks, Recompute recompute) {
  const int devices = chunks >= 1 ? stages / chunks : 0;
  if (stages < 1 || devices < 1 || devices * chunks != stages || devices > int(cluster.devices.size())) {
    throw InputError(Concat(stages, " stages in chunks of ", chunks, " for ", cluster.devices.size(), " devices"));
  }
  std::vector<StageSpec> specs(stages);
  const std::vector<int> in_flight = MicrobatchesInFlight(BuildSchedule(schedule, devices, microbatches, chunks));
  const std::vector<int> placement = StagePlacement(schedule, devices, chunks);
  for (int s = 0; s < stages; ++s) {
    const Device& device = cluster.devices[placement[s]];
    specs[s].speed = device.speed;
    const int64_t usable = UsableMemoryBytes(device);
    specs[s].memory_bytes = usable == kUnlimitedMemory ? kUnlimitedMemory : usable / chunks;
    specs[s].device_memory_bytes = device.memory_bytes;
    specs[s].memory_headroom = device.memory_headroom;
    specs[s].in_flight = in_flight[s];
    if (s > 0) specs[s].in_link = LinkBetween(cluster, placement[s - 1], placement[s]);
    if (s < stages - 1) specs[s].out_link = LinkBetween(cluster, placement[s], placement[s + 1]);
    specs[s].replicas = cluster.replicas;
    specs[s].replica_link = cluster.replica_link;
    specs[s].slowdown = PipelineSlowdown(cluster.shared_slowdown, stages, cluster.replicas);
    specs[s].split_backward = SplitsBackward(schedule);
    const bool can = IsTraining(schedule) && !SplitsBackward(schedule);
    specs[s].recompute = can ? recompute : Recompute::kNever;
    specs[s].step_overhead_ms = StepOverheadMs(cluster, devices);  // replicas dispatch in processes of their own
  }
  return specs;
}

StageCostModel::StageCostModel(const OrderCosts& costs, std::vector<StageSpec> stages,
                               double optimizer_state_factor)
    : costs_(&costs),
      stages_(std::move(stages)),
      static_factor_(costs.training ? 2 + optimizer_state_factor : 1),
      n_(costs.Positions()) {
  if (stages_.empty()) throw InternalError("StageCostModel without stages");
  auto sums = std::make_shared<Sums>();
  sums->work.assign(n_ + 1, 0);
  sums->forward.assign(n_ + 1, 0);
  sums->params.assign(n_ + 1, 0);
  sums->outputs.assign(n_ + 1, 0);
  sums->kept.assign(n_ + 1, 0);
  sums->weight_outputs.assign(n_ + 1, 0);
  sums->useful.assign(n_ + 1, 0);
  for (int p = 0; p < n_; ++p) {
    sums->work[p + 1] = sums->work[p] + costs.forward_ms[p] + costs.backward_ms[p];
    sums->forward[p + 1] = sums->forward[p] + costs.forward_ms[p];
    sums->params[p + 1] = sums->params[p] + costs.param_bytes[p];
    sums->outputs[p + 1] = sums->outputs[p] + costs.output_bytes[p];
    sums->kept[p + 1] = sums->kept[p] + costs.kept_bytes[p];
    sums->weight_outputs[p + 1] = sums->weight_outputs[p] + costs.weight_output_bytes[p];
    sums->useful[p + 1] = sums->useful[p] + (costs.Useful(p) ? 1 : 0);
  }
  sums->first_useful_end.assign(n_ + 1, n_ + 1);
  for (int p = n_ - 1; p >= 0; --p) {
    sums->first_useful_end[p] = costs.Useful(p) ? p + 1 : sums->first_useful_end[p + 1];
  }
  // Live bytes while position p runs: what crosses the cut before it (inputs
  // still needed, relayed values), what it makes and its scratch.
  std::vector<int64_t> live(n_), working(n_, 0);
  for (int p = 0; p < n_; ++p) live[p] = costs.cut_bytes[p] + costs.output_bytes[p] + costs.forward_working_bytes[p];
  sums->peak = SparseMax(live);
  // Training: an op's working memory beyond what is kept, at its backward:
  // the gradient of its output and of its input (each about its output's
  // size), and its weights' gradient before it is added to .grad.
  if (costs.training) {
    for (int p = 0; p < n_; ++p) working[p] = 2 * costs.output_bytes[p] + costs.param_bytes[p];
  }
  sums->transient = SparseMax(working);
  // Model inputs are the crossing values without a producer; counting every
  // value without a gradient over-approximates them, which is safe for a bound.
  for (const LiveValue& v : costs.live_values) {
    if (!v.carries_gradient) sums->input_bytes += v.bytes;
  }
  if (costs.training) {
    std::vector<DominanceSum::Point> unkept, with_gradients;
    for (const LiveValue& v : costs.live_values) {
      const DominanceSum::Point point{v.born, v.last_use, v.bytes};
      if (!v.kept) unkept.push_back(point);
      if (v.carries_gradient) with_gradients.push_back(point);
    }
    sums->relays = DominanceSum(n_, std::move(unkept));
    sums->relayed_gradients = DominanceSum(n_, std::move(with_gradients));
    std::vector<DominanceSum::Point> kept;
    for (int p = 0; p < n_; ++p) {
      if (costs.kept_bytes[p] > 0) kept.push_back({p, costs.next_weight_reader[p], costs.kept_bytes[p]});
    }
    sums->kept_by_next_weight_reader = DominanceSum(n_ + 1, std::move(kept));
  }
  sums_ = std::move(sums);
}

bool StageCostModel::MemoryCanBind(int s) const {
  if (stages_[s].memory_bytes == kUnlimitedMemory) return false;
  // A bound on any stage's ActivationBytes: every value once, and once more
  // for what a stage relays and keeps as a root too.
  // A recomputing stage holds less per micro-batch, and one micro-batch's more.
  const int64_t activations = costs_->training ? 2 * (sums_->outputs[n_] + sums_->input_bytes) : PeakLive(0, n_);
  const int held = stages_[s].in_flight + (stages_[s].recompute == Recompute::kNever ? 0 : 1);
  // Any stage's transient: its largest op's, and at most every value as a
  // gradient it relays.
  const int64_t transient = RangeMax(sums_->transient, 0, n_) +
                            (costs_->training ? sums_->outputs[n_] + sums_->input_bytes : 0);
  return StaticBytes(0, n_) + held * activations + transient > stages_[s].memory_bytes;
}

StageCostModel StageCostModel::WithStages(std::vector<StageSpec> stages) const {
  if (stages.empty()) throw InternalError("StageCostModel without stages");
  StageCostModel copy = *this;
  copy.stages_ = std::move(stages);
  return copy;
}

double StageCostModel::InMs(int s, int a) const {
  if (a <= 0) return 0;
  const Link& link = stages_[s].in_link;
  return TransferMs(costs_->cut_bytes[a], link) + TransferMs(costs_->cut_grad_bytes[a], link);
}

double StageCostModel::OutMs(int s, int e) const {
  if (e >= n_) return 0;
  const Link& link = stages_[s].out_link;
  return TransferMs(costs_->cut_bytes[e], link) + TransferMs(costs_->cut_grad_bytes[e], link);
}

std::vector<std::vector<int64_t>> StageCostModel::SparseMax(const std::vector<int64_t>& values) {
  std::vector<std::vector<int64_t>> table = {values};
  const int n = int(values.size());
  for (int k = 1; (1 << k) <= n; ++k) {
    const auto& prev = table[k - 1];
    std::vector<int64_t> level(n - (1 << k) + 1);
    for (size_t p = 0; p < level.size(); ++p) level[p] = std::max(prev[p], prev[p + (1 << (k - 1))]);
    table.push_back(std::move(level));
  }
  return table;
}

int64_t StageCostModel::RangeMax(const std::vector<std::vector<int64_t>>& table, int a, int e) {
  if (e <= a) return 0;
  int k = 0;
  while ((2 << k) <= e - a) ++k;
  return std::max(table[k][a], table[k][e - (1 << k)]);
}

int64_t StageCostModel::PeakLive(int a, int e) const { return RangeMax(sums_->peak, a, e); }

int64_t StageCostModel::TransientBytes(int a, int e) const {
  // In training, the larger of the largest op's working memory and the
  // gradients that come back for what it sends: those are held from its
  // RECV_B, before its B (or I) has freed anything, and are the first op's
  // output gradient, which the working memory counts. With the gradients of
  // what it relays: they arrive with its B and stay until sent (Branchy's
  // middle stages, which relay 3-4 MiB of skips a micro-batch, measured
  // that much over their plan). The gradients of what it only reads come at
  // the end of its B, its activations by then freed (charging them too put
  // last stages 15% over).
  const int64_t working = RangeMax(sums_->transient, a, e);
  if (!costs_->training) return working;
  return std::max(working, costs_->cut_grad_bytes[e]) + sums_->relayed_gradients.Sum(a, e);
}

int64_t StageCostModel::StaticBytes(int a, int e) const {
  return int64_t(static_factor_ * double(sums_->params[e] - sums_->params[a]));
}

int64_t StageCostModel::ActivationBytes(int a, int e) const {
  if (!costs_->training) return PeakLive(a, e);
  // What autograd keeps of the stage's own values, what it received (kept
  // as the backward's leaves) and what it sends (kept as its roots); a
  // value it receives and sends on unchanged (a relayed skip) is one tensor,
  // held once (Branchy's middle stages were predicted up to 50% high); the
  // last stage, what the loss keeps of the output (GPT's logits: its last
  // stage under GPipe was 12% over, a micro-batch's logits each in flight).
  return sums_->kept[e] - sums_->kept[a] + costs_->cut_bytes[a] + costs_->cut_unkept_bytes[e] -
         sums_->relays.Sum(a, e) + (e == n_ ? costs_->loss_kept_bytes : 0);
}

int64_t StageCostModel::WeightGradientBytes(int a, int e) const {
  // A stage whose inputs take no gradient (the first) has nothing for I to
  // compute: its W runs the whole backward and I keeps nothing.
  if (costs_->cut_grad_bytes[a] == 0) return 0;
  return sums_->weight_outputs[e] - sums_->weight_outputs[a];
}

int64_t StageCostModel::FreedByInputBackwardBytes(int a, int e) const {
  if (!costs_->training || costs_->cut_grad_bytes[a] == 0) return 0;  // the first stage's I does nothing
  // What its nodes keep where no weight reader of the stage uses them, the
  // outputs it sent that nothing keeps, and what the loss keeps.
  const DominanceSum& kept = sums_->kept_by_next_weight_reader;
  return kept.Sum(e, e) - kept.Sum(a, e) + costs_->cut_unkept_bytes[e] + (e == n_ ? costs_->loss_kept_bytes : 0);
}

double StageCostModel::RecomputeMs(int s, int a, int e) const {
  return Recomputes(s, a, e) ? stages_[s].speed * (sums_->forward[e] - sums_->forward[a]) : 0;
}

int64_t StageCostModel::BoundaryBytes(int a, int e) const { return costs_->cut_bytes[a] + costs_->cut_bytes[e]; }

bool StageCostModel::Recomputes(int s, int a, int e) const {
  switch (stages_[s].recompute) {
    case Recompute::kNever: return false;
    case Recompute::kAlways: return true;
    case Recompute::kAuto: return MemoryWith(s, a, e, false) > stages_[s].memory_bytes;
  }
  return false;
}

int64_t StageCostModel::MemoryWith(int s, int a, int e, bool recompute) const {
  const StageSpec& spec = stages_[s];
  if (recompute) {
    return StaticBytes(a, e) + spec.in_flight * BoundaryBytes(a, e) + ActivationBytes(a, e) + TransientBytes(a, e);
  }
  // A split backward keeps, from I to W, a gradient per weight-consuming
  // node: charged for every micro-batch in flight, an upper bound.
  const int64_t for_w = spec.split_backward ? WeightGradientBytes(a, e) : 0;
  return StaticBytes(a, e) + spec.in_flight * (ActivationBytes(a, e) + for_w) + TransientBytes(a, e);
}

int64_t StageCostModel::LeastMemoryBytes(int s, int a, int e) const {
  switch (stages_[s].recompute) {
    case Recompute::kNever: return MemoryWith(s, a, e, false);
    case Recompute::kAlways: return MemoryWith(s, a, e, true);
    case Recompute::kAuto: return std::min(MemoryWith(s, a, e, false), MemoryWith(s, a, e, true));
  }
  return MemoryWith(s, a, e, false);
}

int64_t StageCostModel::MemoryLowerBound(int s, int a, int e) const {
  const int64_t sent = costs_->training ? costs_->cut_unkept_bytes[e] : 0;
  const int64_t kept = MemoryWith(s, a, e, false) - stages_[s].in_flight * sent;
  if (stages_[s].recompute == Recompute::kNever) return kept;
  // Recomputing: what it received, per micro-batch and in the one rebuilt,
  // and what its own nodes keep.
  const int64_t received = costs_->cut_bytes[a];
  const int64_t recomputed = StaticBytes(a, e) + (stages_[s].in_flight + 1) * received +
                             (sums_->kept[e] - sums_->kept[a]) + TransientBytes(a, e);
  return stages_[s].recompute == Recompute::kAlways ? recomputed : std::min(kept, recomputed);
}

}  // namespace mp
