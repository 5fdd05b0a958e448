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
  const std::vector<double>& factors = cluster.optimizer_slowdown;  // every device of every replica steps at once
  const double stepping_at_once =
      factors.empty() ? 1 : factors[std::min<size_t>(size_t(devices) * std::max(cluster.replicas, 1), factors.size()) - 1];
  const std::vector<int> in_flight = MicrobatchesInFlight(schedule, devices, microbatches, chunks);
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
    specs[s].replica_wait_share = cluster.replicas > 1 ? cluster.replica_wait_share : 0;
    specs[s].optimizer_ms_per_mib = cluster.optimizer_ms_per_mib * device.speed * stepping_at_once;
  }
  return specs;
}

StageCostModel::StageCostModel(const OrderCosts& costs, std::vector<StageSpec> stages,
                               double optimizer_state_factor)
    : costs_(&costs),
      stages_(std::move(stages)),
      optimizer_state_factor_(optimizer_state_factor),
      n_(costs.Positions()) {
  if (stages_.empty()) throw InternalError("StageCostModel without stages");
  auto sums = std::make_shared<Sums>();
  sums->work.assign(n_ + 1, 0);
  sums->forward.assign(n_ + 1, 0);
  sums->params.assign(n_ + 1, 0);
  sums->gradients.assign(n_ + 1, 0);
  sums->outputs.assign(n_ + 1, 0);
  sums->kept.assign(n_ + 1, 0);
  sums->weight_outputs.assign(n_ + 1, 0);
  sums->useful.assign(n_ + 1, 0);
  for (int p = 0; p < n_; ++p) {
    sums->work[p + 1] = sums->work[p] + costs.forward_ms[p] + costs.backward_ms[p];
    sums->forward[p + 1] = sums->forward[p] + costs.forward_ms[p];
    sums->params[p + 1] = sums->params[p] + costs.param_bytes[p];
    sums->gradients[p + 1] = sums->gradients[p] + costs.gradient_bytes[p];
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
  std::vector<int64_t> live(n_);
  for (int p = 0; p < n_; ++p) live[p] = costs.cut_bytes[p] + costs.output_bytes[p] + costs.forward_working_bytes[p];
  sums->peak = SparseMax(live);
  // Training: what a backward holds beyond the activations while position
  // p's runs (TransientBytes): its working memory and the gradients of the
  // values crossing the cut after it; for a whole backward, which frees
  // what each node kept as it goes, also what the positions up to p keep,
  // so that a range's query can take off what its positions after p kept.
  // A split backward's I without the weights' gradients, which its W holds
  // one node at a time.
  if (costs.training) {
    std::vector<int64_t> held(n_), held_freeing(n_), weights(n_);
    for (int p = 0; p < n_; ++p) {
      held_freeing[p] = costs.backward_working_bytes[p] + costs.cut_grad_bytes[p + 1] + sums->kept[p + 1];
      held[p] = costs.input_backward_working_bytes[p] + costs.cut_grad_bytes[p + 1];
      weights[p] = costs.backward_working_bytes[p] - costs.input_backward_working_bytes[p];
      sums->most_backward_working = std::max(sums->most_backward_working, costs.backward_working_bytes[p]);
    }
    sums->transient = SparseMax(held);
    sums->transient_freeing = SparseMax(held_freeing);
    sums->weight_transient = SparseMax(weights);
    // The values carrying a gradient that cross each cut, by where their
    // storage was made, with what of that position's kept bytes they are.
    sums->crossing.resize(n_ + 1);
    for (const LiveValue& v : costs.live_values) {
      if (!v.carries_gradient) continue;
      const int64_t kept = v.storage_kept ? std::min(v.bytes, costs.kept_bytes[v.storage_born]) : 0;
      for (int cut = v.born + 1; cut <= v.last_use && cut <= n_; ++cut) {
        sums->crossing[cut].push_back({v.storage_born, v.bytes, kept});
      }
    }
    for (auto& values : sums->crossing) {
      std::sort(values.begin(), values.end(), [](const Crossing& x, const Crossing& y) { return x.born < y.born; });
    }
  }
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
  SetCanBind();
}

void StageCostModel::SetCanBind() {
  can_bind_.resize(stages_.size());
  for (size_t s = 0; s < stages_.size(); ++s) can_bind_[s] = WorkOutCanBind(int(s));
}

bool StageCostModel::WorkOutCanBind(int s) const {
  if (stages_[s].memory_bytes == kUnlimitedMemory) return false;
  // A bound on any stage's ActivationBytes: every value once, and once more
  // for what a stage relays and keeps as a root too.
  // A recomputing stage holds less per micro-batch, and one micro-batch's more.
  const int64_t activations = costs_->training ? 2 * (sums_->outputs[n_] + sums_->input_bytes) : PeakLive(0, n_);
  const int held = stages_[s].in_flight + (stages_[s].recompute == Recompute::kNever ? 0 : 1);
  // Any stage's transient (TransientBytes): its largest op's working
  // memory, and every value at most four times over (the gradients that
  // came back, of what it relays and of what crosses inside, and what it
  // sends and keeps).
  const int64_t transient =
      costs_->training ? sums_->most_backward_working + 4 * (sums_->outputs[n_] + sums_->input_bytes) : 0;
  return StaticBytes(0, n_) + held * activations + transient > stages_[s].memory_bytes;
}

StageCostModel StageCostModel::WithStages(std::vector<StageSpec> stages) const {
  if (stages.empty()) throw InternalError("StageCostModel without stages");
  StageCostModel copy = *this;
  copy.stages_ = std::move(stages);
  copy.SetCanBind();
  copy.cut_ms_.reset();
  copy.in_table_.clear();
  copy.out_table_.clear();
  return copy;
}

StageCostModel StageCostModel::WithTransferTables() const {
  StageCostModel copy = *this;
  auto tables = std::make_shared<std::vector<std::vector<double>>>();
  std::vector<Link> links;
  const auto table_of = [&](const Link& link) {
    const auto known = std::find(links.begin(), links.end(), link);
    if (known != links.end()) return int(known - links.begin());
    links.push_back(link);
    std::vector<double>& table = tables->emplace_back(size_t(n_) + 1);
    for (int c = 0; c <= n_; ++c) table[c] = CutMs(c, link);
    return int(links.size()) - 1;
  };
  copy.in_table_.resize(stages_.size());
  copy.out_table_.resize(stages_.size());
  for (size_t s = 0; s < stages_.size(); ++s) {
    copy.in_table_[s] = table_of(stages_[s].in_link);
    copy.out_table_[s] = table_of(stages_[s].out_link);
  }
  copy.cut_ms_ = std::move(tables);
  return copy;
}

double StageCostModel::CutMs(int cut, const Link& link) const {
  return TransferMs(costs_->cut_bytes[cut], link) + TransferMs(costs_->cut_grad_bytes[cut], link);
}

double StageCostModel::InMs(int s, int a) const {
  if (a <= 0) return 0;
  return in_table_.empty() ? CutMs(a, stages_[s].in_link) : (*cut_ms_)[in_table_[s]][a];
}

double StageCostModel::OutMs(int s, int e) const {
  if (e >= n_) return 0;
  return out_table_.empty() ? CutMs(e, stages_[s].out_link) : (*cut_ms_)[out_table_[s]][e];
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

int64_t StageCostModel::TransientBytes(int a, int e, bool split) const {
  if (!costs_->training || e <= a) return 0;
  // The gradients that came back for what it sends, held from its RECV_B to
  // the end of its B or I (the last stage: the one its loss makes); with
  // those of what it relays, once more as the relayed input's .grad until
  // sent (Branchy's middle stages, which relay 3-4 MiB of skips a
  // micro-batch, measured that much over their plan). The first stage's I
  // has nothing to do: its W is a whole backward.
  const int64_t received = e == n_ ? costs_->loss_gradient_bytes : costs_->cut_grad_bytes[e];
  if (costs_->cut_grad_bytes[a] == 0) split = false;
  const int64_t relayed = sums_->relayed_gradients.Sum(a, e);
  // Then the most one position p's backward adds (backward_working_bytes:
  // the gradients it makes and their scratch) with the gradients crossing
  // the cut after p that did not come back (those of values crossing e
  // whose storage was made at or before p did); its last position's are the
  // ones that came back. A whole backward has freed by then what the
  // positions after p kept, but for the storage of what the stage sends
  // (held as the backward's roots until it ends). A split backward's I
  // keeps the graph for W and frees nothing, and makes no weight gradients:
  // W does, later (an LSTM's zb-h1 stage was 13% over with them in I).
  int64_t most = split ? costs_->input_backward_working_bytes[e - 1] : costs_->backward_working_bytes[e - 1];
  if (e - 1 > a) {
    // Over p in [a, e - 1), in runs between the births of the values
    // crossing e, where what to take off or add back does not change.
    const std::vector<Crossing>& crossing = sums_->crossing[e];
    int64_t came_back = 0, kept_sent = 0;  // born at or before p; born after p
    size_t next = 0;
    for (; next < crossing.size() && crossing[next].born <= a; ++next) came_back += crossing[next].bytes;
    for (size_t i = next; i < crossing.size(); ++i) kept_sent += crossing[i].kept_bytes;
    for (int from = a; from < e - 1;) {
      const int to = next < crossing.size() ? std::min(e - 1, crossing[next].born) : e - 1;
      if (to > from) {
        const int64_t held = split ? RangeMax(sums_->transient, from, to)
                                   : RangeMax(sums_->transient_freeing, from, to) - sums_->kept[e] + kept_sent;
        most = std::max(most, held - came_back);
      }
      from = to;
      for (; next < crossing.size() && crossing[next].born <= from; ++next) {
        came_back += crossing[next].bytes;
        kept_sent -= crossing[next].kept_bytes;
      }
    }
  }
  return received + relayed + most;
}

int64_t StageCostModel::WeightTransientBytes(int a, int e) const {
  if (!costs_->training || e <= a) return 0;
  // The first stage's W is a whole backward.
  if (costs_->cut_grad_bytes[a] == 0) return TransientBytes(a, e, false);
  return RangeMax(sums_->weight_transient, a, e);
}

int64_t StageCostModel::StageTransientBytes(int s, int a, int e) const {
  if (!stages_[s].split_backward) return TransientBytes(a, e, false);
  return std::max(TransientBytes(a, e, true), WeightTransientBytes(a, e));
}

int64_t StageCostModel::StaticBytes(int a, int e) const {
  const int64_t params = sums_->params[e] - sums_->params[a];
  if (!costs_->training) return params;
  return params + int64_t((1 + optimizer_state_factor_) * double(sums_->gradients[e] - sums_->gradients[a]));
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
  // outputs it sent that nothing keeps, what the loss keeps, and what it
  // relays (received and sent on: mpexec lets go of both at I; Branchy's
  // 4-stage zb-h1 device 2 was 18% over its plan without them).
  const DominanceSum& kept = sums_->kept_by_next_weight_reader;
  return kept.Sum(e, e) - kept.Sum(a, e) + costs_->cut_unkept_bytes[e] + sums_->relayed_gradients.Sum(a, e) +
         (e == n_ ? costs_->loss_kept_bytes : 0);
}

double StageCostModel::RecomputeMs(int s, int a, int e) const {
  return Recomputes(s, a, e) ? stages_[s].speed * (sums_->forward[e] - sums_->forward[a]) : 0;
}

int64_t StageCostModel::BoundaryBytes(int a, int e) const { return costs_->cut_bytes[a] + costs_->cut_bytes[e]; }

bool StageCostModel::Recomputes(int s, int a, int e) const {
  switch (stages_[s].recompute) {
    case Recompute::kNever: return false;
    case Recompute::kAlways: return true;
    case Recompute::kAuto: return MemoryCanBind(s) && MemoryWith(s, a, e, false) > stages_[s].memory_bytes;
  }
  return false;
}

int64_t StageCostModel::MemoryWith(int s, int a, int e, bool recompute) const {
  const StageSpec& spec = stages_[s];
  if (recompute) {
    return StaticBytes(a, e) + spec.in_flight * BoundaryBytes(a, e) + ActivationBytes(a, e) +
           TransientBytes(a, e, false);
  }
  // A split backward keeps, from I to W, a gradient per weight-consuming
  // node: charged for every micro-batch in flight, an upper bound.
  const int64_t for_w = spec.split_backward ? WeightGradientBytes(a, e) : 0;
  return StaticBytes(a, e) + spec.in_flight * (ActivationBytes(a, e) + for_w) + StageTransientBytes(s, a, e);
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
  // Neither what it sends nor its transient (what its positions after the
  // largest one's kept comes off it).
  const int64_t sent = costs_->training ? costs_->cut_unkept_bytes[e] : 0;
  const int64_t kept = MemoryWith(s, a, e, false) - stages_[s].in_flight * sent - StageTransientBytes(s, a, e);
  if (stages_[s].recompute == Recompute::kNever) return kept;
  // Recomputing: what it received, per micro-batch and in the one rebuilt,
  // and what its own nodes keep.
  const int64_t received = costs_->cut_bytes[a];
  const int64_t recomputed =
      StaticBytes(a, e) + (stages_[s].in_flight + 1) * received + (sums_->kept[e] - sums_->kept[a]);
  return stages_[s].recompute == Recompute::kAlways ? recomputed : std::min(kept, recomputed);
}

}  // namespace mp
