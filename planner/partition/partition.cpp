// From stage bounds to a Partition: node lists, the tensors each cut carries
// (by liveness, so relayed skip connections appear on every cut they
// cross), per-stage times and memory, and the simulator's inputs.
#include "planner/partition/partition.h"

#include <algorithm>

#include "common/error.h"

namespace mp {
namespace {

std::vector<CutTensor> CutTensors(const OrderCosts& costs, int cut, int peer) {
  std::vector<CutTensor> out;
  for (const LiveValue& v : ValuesAcrossCut(costs, cut)) out.push_back({v.value, peer, v.bytes, v.carries_gradient});
  return out;
}

// Stage s of `model` on positions [a, e), on `device`.
Stage MakeStage(const StageCostModel& model, int s, int a, int e, int device) {
  const OrderCosts& costs = model.Costs();
  if (e <= a) throw InternalError(Concat("partition bounds: stage ", s, " is empty [", a, ", ", e, ")"));
  Stage st;
  st.index = s;
  st.device = device;
  const double speed = model.Spec(s).speed;
  for (int q = a; q < e; ++q) {
    st.forward_ms += speed * costs.forward_ms[q];
    st.backward_ms += speed * costs.backward_ms[q];
    st.input_backward_ms += speed * costs.input_backward_ms[q];
    st.weight_backward_ms += speed * costs.weight_backward_ms[q];
    st.param_bytes += costs.param_bytes[q];
    if (costs.training) st.gradient_bytes += costs.gradient_bytes[q];
  }
  if (s == 0) {
    st.input_backward_ms = 0;  // its inputs take no gradient: W is its whole backward
    st.weight_backward_ms = st.backward_ms;
  }
  st.transfer_ms = model.InMs(s, a) + model.OutMs(s, e);
  if (costs.training) st.allreduce_ms = AllReduceMs(st.gradient_bytes, model.Spec(s).replicas, model.Spec(s).replica_link);
  if (costs.training) st.optimizer_ms = model.Spec(s).optimizer_ms_per_mib * double(st.gradient_bytes) / (1 << 20);
  st.cost_ms = model.StageMs(s, a, e);
  st.static_bytes = model.StaticBytes(a, e);
  st.activation_bytes = model.ActivationBytes(a, e);
  st.recompute = model.Recomputes(s, a, e);
  if (st.recompute) {
    st.recompute_ms = model.RecomputeMs(s, a, e);
    st.recomputed_bytes = st.activation_bytes;
    st.activation_bytes = model.BoundaryBytes(a, e);
  }
  st.transient_bytes = model.TransientBytes(a, e, model.Spec(s).split_backward);
  st.whole_transient_bytes = model.TransientBytes(a, e, false);
  st.weight_transient_bytes = model.Spec(s).split_backward ? model.WeightTransientBytes(a, e) : 0;
  st.received_bytes = costs.training ? costs.cut_bytes[a] : 0;
  st.sent_gradient_bytes = costs.training ? costs.cut_grad_bytes[a] : 0;
  st.forward_peak_bytes = model.ForwardPeakBytes(a, e);
  st.weight_gradient_bytes = model.Spec(s).split_backward ? model.WeightGradientBytes(a, e) : 0;
  st.freed_by_i_bytes = model.Spec(s).split_backward && !st.recompute ? model.FreedByInputBackwardBytes(a, e) : 0;
  st.in_flight = model.Spec(s).in_flight;
  st.peak_memory_bytes = model.MemoryBytes(s, a, e);
  st.memory_limit_bytes = model.Spec(s).memory_bytes;
  st.fits = model.Fits(s, a, e);
  return st;
}

// The transfers over cut e, on the link after stage s.
TransferTimes CutTransfer(const StageCostModel& model, int s, int e) {
  const Link& link = model.Spec(s).out_link;
  return {TransferMs(model.Costs().cut_bytes[e], link), TransferMs(model.Costs().cut_grad_bytes[e], link)};
}

// The partition's bottleneck and whether it fits, from its stages.
void Summarise(Partition& p) {
  p.bottleneck_ms = 0;
  p.fits = true;
  for (const Stage& st : p.stages) {
    p.bottleneck_ms = std::max(p.bottleneck_ms, st.cost_ms);
    p.fits = p.fits && st.fits;
  }
}

}  // namespace

Partition MakePartition(const StageCostModel& model, const std::vector<int>& bounds, const std::string& method,
                        ScheduleKind schedule, int microbatches, bool listed, int chunks) {
  const OrderCosts& costs = model.Costs();
  const int K = model.Stages();
  const int n = model.Positions();
  if (int(bounds.size()) != K + 1 || bounds.front() != 0 || bounds.back() != n) {
    throw InternalError(Concat("partition bounds: ", bounds.size(), " entries for ", K, " stages of ", n,
                               " positions"));
  }
  if (chunks < 1 || K % chunks != 0) throw InternalError(Concat("partition: ", K, " stages in chunks of ", chunks));
  Partition p;
  p.method = method;
  p.training = costs.training;
  p.schedule = schedule;
  p.chunks = chunks;
  p.microbatches = microbatches;
  p.microbatch_size = costs.microbatch;
  p.bounds = bounds;
  p.slowdown = model.Spec(0).slowdown;
  p.step_overhead_ms = model.Spec(0).step_overhead_ms;
  p.replica_wait_share = model.Spec(0).replica_wait_share;
  const std::vector<int> placement = StagePlacement(schedule, K / chunks, chunks);
  for (int s = 0; s < K; ++s) {
    p.stages.push_back(MakeStage(model, s, bounds[s], bounds[s + 1], placement[s]));
    if (s < K - 1) p.transfers.push_back(CutTransfer(model, s, bounds[s + 1]));
  }
  Summarise(p);
  if (listed) ListStages(p, costs);
  return p;
}

void RunWhole(Partition& p, size_t s) {
  Stage& st = p.stages[s];
  st.whole_backward = true;
  st.peak_memory_bytes -= int64_t(st.in_flight) * st.weight_gradient_bytes +
                          std::max(st.transient_bytes, st.weight_transient_bytes) - st.whole_transient_bytes;
  st.transient_bytes = st.whole_transient_bytes;
  st.weight_transient_bytes = 0;
  st.weight_gradient_bytes = 0;
  st.freed_by_i_bytes = 0;
}

Partition MoveBound(const StageCostModel& model, const Partition& p, size_t i, int to) {
  if (!p.order.empty()) throw InternalError("MoveBound on a listed partition");
  if (i < 1 || i + 1 >= p.bounds.size()) throw InternalError(Concat("MoveBound: bound ", i, " of ", p.bounds.size()));
  Partition q = p;
  q.cut.clear();
  q.bounds[i] = to;
  for (const size_t s : {i - 1, i}) {
    const bool whole = q.stages[s].whole_backward;
    q.stages[s] = MakeStage(model, int(s), q.bounds[s], q.bounds[s + 1], q.stages[s].device);
    if (whole) RunWhole(q, s);
  }
  q.transfers[i - 1] = CutTransfer(model, int(i) - 1, to);
  Summarise(q);
  return q;
}

void ListStages(Partition& p, const OrderCosts& costs) {
  p.order = costs.order;
  const int K = int(p.stages.size());
  for (int s = 0; s < K; ++s) {
    p.stages[s].nodes.assign(costs.order.begin() + p.bounds[s], costs.order.begin() + p.bounds[s + 1]);
    if (s > 0) p.stages[s].receives = CutTensors(costs, p.bounds[s], s - 1);
    if (s < K - 1) p.stages[s].sends = CutTensors(costs, p.bounds[s + 1], s + 1);
  }
}

SimResult SimulatePartition(const Partition& p) { return SimulatePartition(p, PartitionSchedule(p)); }

namespace {

// The simulator's inputs for the partition's stages: times, memory,
// all-reduces and optimizer steps. `times_only` (PartitionStepTimes): no
// memory, and a whole_backward stage's B as its I and no W.
struct StageInputs {
  std::vector<StageTimes> times;
  std::vector<StageMemory> memory;
  std::vector<double> allreduce, optimizer;
};

StageInputs InputsOf(const Partition& p, bool times_only) {
  StageInputs in;
  for (const Stage& st : p.stages) {
    // A recomputing stage's B runs its forward first, and holds what it rebuilds until B ends.
    const double backward = st.backward_ms + st.recompute_ms;
    const bool as_split = times_only && st.whole_backward;
    in.times.push_back({st.forward_ms, backward, as_split ? backward : st.input_backward_ms,
                        as_split ? 0.0 : st.weight_backward_ms});
    if (!times_only) {
      in.memory.push_back({st.static_bytes, st.activation_bytes, st.transient_bytes + st.recomputed_bytes,
                           st.weight_gradient_bytes, st.gradient_bytes, st.received_bytes, st.forward_peak_bytes,
                           st.freed_by_i_bytes, st.weight_transient_bytes, st.sent_gradient_bytes});
    }
    in.allreduce.push_back(st.allreduce_ms);
    in.optimizer.push_back(st.optimizer_ms);
  }
  return in;
}

}  // namespace

SimResult SimulatePartition(const Partition& p, const Schedule& schedule) {
  const StageInputs in = InputsOf(p, false);
  return SimulateStep(schedule, in.times, p.transfers, in.memory, in.allreduce, p.slowdown, p.step_overhead_ms,
                      in.optimizer, p.replica_wait_share);
}

SimResult PartitionStepTimes(const Partition& p, const Schedule& lists, const ReplayOrder& order,
                             double give_up_at_ms) {
  const StageInputs in = InputsOf(p, true);
  return SimulateStep(lists, in.times, p.transfers, {}, in.allreduce, p.slowdown, p.step_overhead_ms, in.optimizer,
                      p.replica_wait_share, false, &order, give_up_at_ms);
}

Schedule PartitionSchedule(const Partition& p) {
  Schedule schedule = BuildSchedule(p.schedule, int(p.stages.size()) / p.chunks, p.microbatches, p.chunks);
  std::vector<bool> whole(p.stages.size(), false);
  for (size_t s = 0; s < p.stages.size(); ++s) whole[s] = p.stages[s].whole_backward;
  if (std::find(whole.begin(), whole.end(), true) == whole.end()) return schedule;
  return WithWholeBackward(std::move(schedule), whole);
}

std::vector<int> BoundsFromStages(const std::vector<int>& stage_of_position) {
  std::vector<int> bounds = {0};
  for (size_t q = 1; q < stage_of_position.size(); ++q) {
    const int step = stage_of_position[q] - stage_of_position[q - 1];
    if (step == 1) {
      bounds.push_back(int(q));
    } else if (step != 0) {
      throw InternalError(Concat("stage assignment jumps from ", stage_of_position[q - 1], " to ",
                                 stage_of_position[q], " at position ", q));
    }
  }
  if (!stage_of_position.empty() && stage_of_position.front() != 0) {
    throw InternalError("stage assignment does not start at stage 0");
  }
  bounds.push_back(int(stage_of_position.size()));
  return bounds;
}

}  // namespace mp
