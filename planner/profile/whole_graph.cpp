#include "planner/profile/whole_graph.h"

#include <torch/csrc/autograd/autograd.h>

#include "common/error.h"
#include "planner/profile/device_sync.h"

namespace mp {

WholeGraph::WholeGraph(const CanonicalGraph& canonical, const std::vector<c10::IValue>& model_inputs,
                       const PassOptions& options)
    : options_(options), runner_(canonical.graph, "whole"), sync_(DeviceSync(options.device)) {
  for (const auto& input : canonical.Stack(model_inputs))
    stack_.push_back(MapTensors(input, [&](const at::Tensor& t) { return t.detach().to(options.device); }));
  for (size_t p = 0; p < canonical.params.size(); ++p) {
    at::Tensor& t = stack_[canonical.num_model_inputs + p].toTensor();
    if (options.training && canonical.params[p].tensor.requires_grad() && t.is_floating_point()) {
      t.requires_grad_(true);
      params_.push_back(t);
    }
  }
  Forward();
  Backward();
}

double WholeGraph::Forward() {
  // Free the previous run's activations before the clock starts.
  outputs_.clear();
  seeds_.clear();
  std::vector<c10::IValue> results;
  const double ms = SyncedMs([&] { results = runner_.Run(stack_); }, sync_);
  for (const auto& value : results)
    for (const auto& t : FlattenTensors(value))
      if (t.defined() && t.requires_grad()) outputs_.push_back(t);
  for (const auto& t : outputs_) seeds_.push_back(at::ones_like(t));
  return ms;
}

void WholeGraph::ForgetGradients() {
  for (at::Tensor& p : params_) p.mutable_grad() = at::Tensor();
}

double WholeGraph::Backward() {
  if (!options_.training || outputs_.empty() || params_.empty()) return 0;
  try {
    // Into the parameters' .grad: fresh after ForgetGradients (the
    // profiler's timed runs, as a step's first micro-batch), else added
    // into, as every later micro-batch (the contention probe's copies).
    return SyncedMs([&] { torch::autograd::backward(outputs_, seeds_); }, sync_);
  } catch (const c10::Error& e) {
    // An in-place write to a value autograd saved: eager PyTorch
    // cannot train this model either.
    throw InputError(Concat("the model cannot be trained: autograd refuses its backward: ",
                            e.what_without_backtrace()));
  }
}

}  // namespace mp
