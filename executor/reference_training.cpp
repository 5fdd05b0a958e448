// ReferenceTrainer: per micro-batch forward, loss, backward into .grad, then
// one optimizer step (clipping first where asked), with the loss and
// optimizer the pipeline uses. With
// replicas, each replica's micro-batches accumulate apart and the replicas'
// sums are added in replica order, as their all-reduce adds them (for two
// replicas that is the same float sum; the order matters where a
// parameter's gradient is nearly all rounding, such as a bias that a later
// BatchNorm cancels).
#include "executor/reference_training.h"

#include <ATen/ATen.h>

#include "common/error.h"
#include "planner/graph/rng_scope.h"
#include "planner/graph/run_graph.h"

namespace mp {

namespace {

at::Tensor Copy(const at::Tensor& t) { return t.detach().clone().requires_grad_(t.requires_grad()); }

}  // namespace

std::vector<at::Tensor> CloneState(const CanonicalGraph& canonical) {
  std::vector<at::Tensor> state;
  for (const auto& p : canonical.params) state.push_back(Copy(p.tensor));
  return state;
}

void AssignState(const CanonicalGraph& canonical, const std::vector<at::Tensor>& state) {
  if (state.size() != canonical.params.size())
    throw InternalError(Concat("state of ", state.size(), " tensors for ", canonical.params.size()));
  const at::NoGradGuard no_grad;
  for (size_t i = 0; i < state.size(); ++i) canonical.params[i].tensor.copy_(state[i]);
}

std::vector<at::Tensor> GradientsOf(const std::vector<at::Tensor>& state) {
  std::vector<at::Tensor> grads;
  for (const at::Tensor& t : state) {
    grads.push_back(t.grad().defined() ? t.grad().detach().clone() : at::zeros_like(t));
  }
  return grads;
}

std::vector<at::Tensor> GradientsOf(const std::vector<LiftedTensor>& params) {
  std::vector<at::Tensor> tensors;
  for (const auto& p : params) tensors.push_back(p.tensor);
  return GradientsOf(tensors);
}

ReferenceTrainer::ReferenceTrainer(const LoadedPlan& loaded, const std::vector<at::Tensor>& state,
                                   const TrainingOptions& options, bool microbatched, uint64_t seed)
    : loaded_(loaded),
      options_(options),
      microbatched_(microbatched),
      seed_(seed),
      runner_(loaded.canonical.graph, microbatched ? "reference" : "reference_full_batch"),
      optimizer_(state.size(), ResolveOptimizer(options.optimizer, loaded.plan)) {
  for (const at::Tensor& t : state) state_.push_back(Copy(t));  // trained in place: never the caller's tensors
}

double ReferenceTrainer::Step(const std::vector<c10::IValue>& inputs, const at::Tensor& labels) {
  const Plan& plan = loaded_.plan;
  std::vector<std::vector<c10::IValue>> parts;
  if (microbatched_) {
    parts = SplitMicrobatches(plan, inputs);
  } else {
    parts.push_back(CloneTensors(inputs));  // the full batch in one go, on copies too (SplitMicrobatches says why)
  }
  const auto label_parts =
      microbatched_ ? SplitTensor(plan, labels, LabelsBatchDim(loaded_.output_layout, options_.loss), "labels")
                    : std::vector<at::Tensor>{labels};
  const size_t loss_tensor = LossTensor(loaded_.output_layout, options_.loss);
  const LossReduction reduction = OwnLossReduction(loaded_.output_layout, options_.loss);
  for (auto& t : state_) t.mutable_grad() = at::Tensor();
  const size_t per_replica = microbatched_ && plan.replicas > 1 ? size_t(plan.microbatches) : parts.size();
  std::vector<at::Tensor> replicas_sum(state_.size());
  double loss = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    std::vector<c10::IValue> stack = parts[i];
    for (const auto& t : state_) stack.emplace_back(t);
    std::vector<c10::IValue> outputs;
    {
      const RngScope rng({seed_, steps_, int64_t(i)});
      outputs = runner_.Run(std::move(stack));
    }
    std::vector<at::Tensor> tensors;
    for (const c10::IValue& output : outputs) {
      for (at::Tensor& t : FlattenTensors(output)) tensors.push_back(std::move(t));
    }
    if (tensors.size() <= loss_tensor) throw InputError("training needs a tensor as the model's first output");
    at::Tensor l = MicrobatchLoss(tensors[loss_tensor], label_parts[i], options_.loss, labels.numel(), reduction);
    l.backward();
    loss += l.item<double>();
    if (per_replica == parts.size() || (i + 1) % per_replica != 0) continue;
    for (size_t j = 0; j < state_.size(); ++j) {  // this replica's share is done
      at::Tensor grad = state_[j].grad();
      if (!grad.defined()) continue;
      replicas_sum[j] = replicas_sum[j].defined() ? replicas_sum[j] + grad : grad.clone();
      state_[j].mutable_grad() = at::Tensor();
    }
  }
  if (per_replica != parts.size()) {
    for (size_t j = 0; j < state_.size(); ++j) state_[j].mutable_grad() = replicas_sum[j];
  }
  if (const double max_norm = optimizer_.settings().clip_grad_norm; max_norm > 0) {
    ClipGradients(state_, SquaredGradNorm(state_), max_norm);
  }
  optimizer_.Step(state_);
  ++steps_;
  return loss;
}

}  // namespace mp
