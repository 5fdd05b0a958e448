// Memory per device, predicted against measured, by category: what
// torch.cuda.max_memory_allocated answers per GPU, for CPU workers.
// Predicted: the plan's stages on each program (device) and the simulated
// peak of their activations (SimulatePlan). Measured: the parameters,
// gradients and momentum buffers the process holds for the device's
// stages after the steps, and the most its worker's tensors added during a
// step (PipelineRun::device_step_peak_bytes, MemoryMeter).
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "executor/pipeline.h"
#include "executor/training.h"

namespace mp {

struct MemoryCategories {
  int64_t parameters = 0;
  int64_t gradients = 0;
  int64_t optimizer_state = 0;
  // Activations, the boundary values in flight and each op's transients.
  // Measured: the step's peak less its gradients (made during the step).
  int64_t activations = 0;
};

struct DeviceMemory {
  int device = 0;  // the program's index
  MemoryCategories predicted;
  MemoryCategories measured;
  int64_t predicted_peak_bytes = 0;
  int64_t measured_peak_bytes = -1;  // -1: not measured here (another process's, or no meter)
};

// One entry per program of the plan. `step_peak_bytes` per program: the
// most its worker added in a step that counted (-1 or missing: none did);
// `optimizer` the optimizer after the steps (training; nullptr in inference).
std::vector<DeviceMemory> CompareDeviceMemory(const LoadedPlan& loaded, const std::vector<int64_t>& step_peak_bytes,
                                              const Optimizer* optimizer);

// [{device, predicted_peak_bytes, measured_peak_bytes, categories: {name: {predicted, measured}}}]
nlohmann::json DeviceMemoryJson(const std::vector<DeviceMemory>& devices);

}  // namespace mp
