// Plan helpers: node ranges, the stage of each node, and replaying the
// plan's action lists through the simulator with its own predictions.
#include "planner/plan/plan.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace mp {

std::vector<NodeRange> ToRanges(std::vector<int> nodes) {
  std::sort(nodes.begin(), nodes.end());
  std::vector<NodeRange> ranges;
  for (int id : nodes) {
    if (!ranges.empty() && ranges.back().second + 1 >= id) {
      ranges.back().second = std::max(ranges.back().second, id);
    } else {
      ranges.push_back({id, id});
    }
  }
  return ranges;
}

std::vector<int> FromRanges(const std::vector<NodeRange>& ranges) {
  std::vector<int> nodes;
  for (const NodeRange& r : ranges) {
    for (int id = r.first; id <= r.second; ++id) nodes.push_back(id);
  }
  return nodes;
}

std::vector<int> StageOfNode(const Plan& plan) {
  std::vector<int> stage_of(plan.model.nodes, -1);
  for (const PlanStage& stage : plan.stages) {
    for (int id : FromRanges(stage.nodes)) {
      if (id >= 0 && id < plan.model.nodes) stage_of[id] = stage.id;
    }
  }
  return stage_of;
}

int64_t MicrobatchSize(int64_t batch, int microbatches) {
  return batch / microbatches + (batch % microbatches != 0);
}

int64_t LastMicrobatchSize(int64_t batch, int microbatches) {
  return batch - int64_t(microbatches - 1) * MicrobatchSize(batch, microbatches);
}

bool MicrobatchesSplit(int64_t batch, int microbatches) {
  return microbatches >= 1 && microbatches <= batch &&
         (microbatches - 1) * MicrobatchSize(batch, microbatches) < batch;
}

int64_t ReplicaBatch(const Plan& plan) { return plan.batch / std::max(plan.replicas, 1); }

int Devices(const PlanCandidate& a) { return a.replicas * (a.stages / std::max(a.chunks, 1)); }

std::string ObjectiveName(Objective objective) {
  return objective == Objective::kStep ? "step" : "throughput-per-device";
}

double RankFactor(const PlanCandidate& a, Objective objective) {
  return objective == Objective::kStep ? 1.0 : double(Devices(a));
}

double RankMs(const PlanCandidate& a, Objective objective) { return a.step_ms * RankFactor(a, objective); }

PlanCandidate Ranked(const PlanCandidate& a, Objective objective) {
  PlanCandidate r = a;
  r.step_ms = RankMs(a, objective);
  return r;
}

int StagesPerDevice(const Plan& plan) {
  return int(plan.stages.size()) / std::max(int(plan.programs.size()), 1);
}

int OptimizerStateTensors(const std::string& optimizer) {
  if (optimizer == "sgd") return 0;
  if (optimizer == "momentum") return 1;
  if (optimizer == "adam" || optimizer == "adamw") return 2;
  return -1;
}

int64_t StageParameterBytes(const Plan& plan, const PlanStage& stage) {
  if (!plan.training) return stage.static_bytes;
  const double with_state = double(stage.gradient_bytes) * (1 + plan.optimizer_state_factor);
  return std::max<int64_t>(0, stage.static_bytes - int64_t(std::llround(with_state)));
}

std::string ProgramStages(const Plan& plan, int program) {
  std::string stages;
  for (const PlanStage& s : plan.stages) {
    if (s.program == program) stages += (stages.empty() ? "" : ",") + std::to_string(s.id);
  }
  return stages;
}

Schedule PlanSchedule(const Plan& plan) {
  Schedule schedule;
  schedule.kind = plan.schedule;
  schedule.stages = int(plan.stages.size());
  schedule.microbatches = plan.microbatches;
  for (const PlanProgram& program : plan.programs) schedule.actions.push_back(program.actions);
  for (const PlanStage& stage : plan.stages) schedule.stage_device.push_back(stage.program);
  return schedule;
}

SimResult SimulatePlan(const Plan& plan) {
  std::vector<StageTimes> times;
  std::vector<TransferTimes> transfers;
  std::vector<StageMemory> memory;
  std::vector<double> allreduce, optimizer;
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    const PlanStage& stage = plan.stages[s];
    const double recompute_ms = stage.recompute ? stage.forward_ms : 0;  // B runs the forward first
    times.push_back({stage.forward_ms, stage.backward_ms + recompute_ms, stage.input_backward_ms,
                     stage.weight_backward_ms});
    int64_t received = 0, sent_gradients = 0;  // training: StageMemory's received_bytes, sent_gradient_bytes
    for (const PlanTensor& t : stage.receives) received += t.bytes, sent_gradients += t.gradient ? t.bytes : 0;
    memory.push_back({stage.static_bytes, stage.activation_bytes, stage.transient_bytes + stage.recomputed_bytes,
                      stage.weight_gradient_bytes, plan.training ? stage.gradient_bytes : 0, plan.training ? received : 0,
                      stage.forward_peak_bytes, stage.freed_by_i_bytes,
                      stage.weight_transient_bytes >= 0 ? stage.weight_transient_bytes : stage.transient_bytes,
                      plan.training ? sent_gradients : 0});
    allreduce.push_back(stage.allreduce_ms);
    optimizer.push_back(stage.optimizer_ms);
    if (s + 1 < plan.stages.size()) {
      transfers.push_back({stage.send_ms, plan.stages[s + 1].send_gradients_ms});
    }
  }
  return SimulateStep(PlanSchedule(plan), times, transfers, memory, allreduce,
                      PipelineSlowdown(plan.profile.shared_slowdown, int(plan.stages.size()), plan.replicas),
                      plan.profile.step_overhead_ms, optimizer, plan.profile.replica_wait_share);
}

}  // namespace mp
