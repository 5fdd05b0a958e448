#include "executor/device_memory.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "planner/plan/plan.h"

namespace mp {
namespace {

int64_t Bytes(const at::Tensor& t) { return t.defined() ? int64_t(t.nbytes()) : 0; }

const void* StorageKey(const at::Tensor& t) { return t.storage().data(); }

}  // namespace

std::vector<DeviceMemory> CompareDeviceMemory(const LoadedPlan& loaded, const std::vector<int64_t>& step_peak_bytes,
                                              const Optimizer* optimizer) {
  const Plan& plan = loaded.plan;
  const StageLayout& layout = loaded.layout;
  const int devices = int(plan.programs.size());
  std::vector<DeviceMemory> out(devices);
  for (int d = 0; d < devices; ++d) out[d].device = d;

  // Predicted: the planner's static bytes are parameters (each on the first
  // stage that reads it, tied weights once), the gradients of those not
  // frozen (PlanStage::gradient_bytes) and the optimizer state it assumed
  // for them (optimizer_state_factor tensors each); the simulated peak adds
  // the activations the schedule holds at once.
  const SimResult sim = SimulatePlan(plan);
  for (const PlanStage& stage : plan.stages) {
    MemoryCategories& p = out[stage.program].predicted;
    const int64_t params = StageParameterBytes(plan, stage);
    const int64_t gradients = plan.training ? stage.gradient_bytes : 0;
    p.parameters += params;
    p.gradients += gradients;
    p.optimizer_state += std::max<int64_t>(0, stage.static_bytes - params - gradients);
  }
  for (int d = 0; d < devices; ++d) {
    DeviceMemory& m = out[d];
    m.predicted_peak_bytes = d < int(sim.device_peak_memory_bytes.size()) ? sim.device_peak_memory_bytes[d] : 0;
    const int64_t fixed = m.predicted.parameters + m.predicted.gradients + m.predicted.optimizer_state;
    m.predicted.activations = std::max<int64_t>(0, m.predicted_peak_bytes - fixed);
  }

  // Measured: a device no step measured stays at -1.
  std::vector<int64_t> step_peak(devices, -1);
  for (int d = 0; d < devices && d < int(step_peak_bytes.size()); ++d) step_peak[d] = step_peak_bytes[d];
  std::set<const void*> counted;  // a storage once, on the first device that reads it (tied weights)
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    MemoryCategories& m = out[plan.stages[s].program].measured;
    for (const auto& [key, tensor] : layout.stage_params[s]) {
      m.gradients += Bytes(tensor.grad());  // an alias's gradient is a tensor of its own
      if (!counted.insert(StorageKey(tensor)).second) continue;
      m.parameters += Bytes(tensor);
      auto index = layout.param_index.find(key);
      if (optimizer && index != layout.param_index.end()) m.optimizer_state += optimizer->StateBytes(index->second);
    }
  }
  for (int d = 0; d < devices; ++d) {
    DeviceMemory& m = out[d];
    if (step_peak[d] < 0) continue;
    m.measured.activations = std::max<int64_t>(0, step_peak[d] - m.measured.gradients);
    m.measured_peak_bytes = m.measured.parameters + m.measured.optimizer_state + step_peak[d];
  }
  return out;
}

nlohmann::json DeviceMemoryJson(const std::vector<DeviceMemory>& devices) {
  nlohmann::json list = nlohmann::json::array();
  for (const DeviceMemory& m : devices) {
    const bool measured = m.measured_peak_bytes >= 0;
    const auto pair = [&](int64_t predicted, int64_t got) {
      return nlohmann::json{{"predicted", predicted}, {"measured", measured ? got : -1}};
    };
    list.push_back({{"device", m.device},
                    {"predicted_peak_bytes", m.predicted_peak_bytes},
                    {"measured_peak_bytes", m.measured_peak_bytes},
                    {"categories",
                     {{"parameters", pair(m.predicted.parameters, m.measured.parameters)},
                      {"gradients", pair(m.predicted.gradients, m.measured.gradients)},
                      {"optimizer_state", pair(m.predicted.optimizer_state, m.measured.optimizer_state)},
                      {"activations", pair(m.predicted.activations, m.measured.activations)}}}});
  }
  return list;
}

}  // namespace mp
