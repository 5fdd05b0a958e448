// Training without a pipeline: the canonical graph run whole on one device,
// from a copy of the model's state. `mpexec --verify` trains it on the same
// steps as the pipeline and compares the losses and the state it ends with.
#pragma once

#include <ATen/core/ivalue.h>

#include <string>
#include <vector>

#include "executor/loaded_plan.h"
#include "executor/training.h"
#include "planner/graph/run_graph.h"

namespace mp {

class ReferenceTrainer {
 public:
  // Starts from a copy of `state` (the canonical parameters and buffers,
  // in order; see CloneState), which it leaves as it was. `microbatched`: the plan's micro-batches one after
  // another, as the pipeline computes them; else the whole batch at once.
  // Step n's micro-batch m runs in RngScope({seed, n, m}), as in the
  // pipeline; the whole batch at once runs as micro-batch 0.
  ReferenceTrainer(const LoadedPlan& loaded, const std::vector<at::Tensor>& state, const TrainingOptions& options,
                   bool microbatched, uint64_t seed = 0);
  // One step on the whole batch's inputs and labels; returns its loss.
  double Step(const std::vector<c10::IValue>& inputs, const at::Tensor& labels);
  const std::vector<at::Tensor>& State() const { return state_; }

 private:
  const LoadedPlan& loaded_;
  std::vector<at::Tensor> state_;
  TrainingOptions options_;
  bool microbatched_;
  uint64_t seed_;
  int64_t steps_ = 0;
  GraphRunner runner_;
  Optimizer optimizer_;
};

// Detached copies of the model's parameters and buffers (canonical order),
// parameters still asking for gradients.
std::vector<at::Tensor> CloneState(const CanonicalGraph& canonical);

// Copies `state` (CloneState's order) into the model's parameters and
// buffers, in place.
void AssignState(const CanonicalGraph& canonical, const std::vector<at::Tensor>& state);

// Copies of their gradients (.grad), zeros where none.
std::vector<at::Tensor> GradientsOf(const std::vector<at::Tensor>& state);
std::vector<at::Tensor> GradientsOf(const std::vector<LiftedTensor>& params);

}  // namespace mp
