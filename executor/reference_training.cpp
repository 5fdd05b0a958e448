// ReferenceTrainer: per micro-batch forward, loss, backward into .grad, then
// one SGD step, with the loss and optimizer the pipeline uses.
#include "executor/reference_training.h"

#include <ATen/ATen.h>

#include "common/error.h"

namespace mp {

namespace {

at::Tensor Copy(const at::Tensor& t) { return t.detach().clone().requires_grad_(t.requires_grad()); }

}  // namespace

std::vector<at::Tensor> CloneState(const CanonicalGraph& canonical) {
  std::vector<at::Tensor> state;
  for (const auto& p : canonical.params) state.push_back(Copy(p.tensor));
  return state;
}

ReferenceTrainer::ReferenceTrainer(const LoadedPlan& loaded, const std::vector<at::Tensor>& state,
                                   const TrainingOptions& options, bool microbatched)
    : loaded_(loaded),
      options_(options),
      microbatched_(microbatched),
      runner_(loaded.canonical.graph, microbatched ? "reference" : "reference_full_batch"),
      sgd_(state.size(), options.lr, options.momentum) {
  for (const at::Tensor& t : state) state_.push_back(Copy(t));  // trained in place: never the caller's tensors
}

double ReferenceTrainer::Step(const std::vector<c10::IValue>& inputs, const at::Tensor& labels) {
  const Plan& plan = loaded_.plan;
  const auto parts = microbatched_ ? SplitMicrobatches(plan, inputs) : std::vector<std::vector<c10::IValue>>{inputs};
  const auto label_parts = microbatched_ ? SplitTensor(plan, labels, loaded_.output_layout.batch_dims.at(0), "labels")
                                         : std::vector<at::Tensor>{labels};
  for (auto& t : state_) t.mutable_grad() = at::Tensor();
  double loss = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    std::vector<c10::IValue> stack = parts[i];
    for (const auto& t : state_) stack.emplace_back(t);
    const auto outputs = runner_.Run(std::move(stack));
    const auto tensors = outputs.empty() ? std::vector<at::Tensor>{} : FlattenTensors(outputs.front());
    if (tensors.empty()) throw InputError("training needs a tensor as the model's first output");
    at::Tensor l = MicrobatchLoss(tensors.front(), label_parts[i], options_.loss, labels.numel());
    l.backward();
    loss += l.item<double>();
  }
  for (size_t i = 0; i < state_.size(); ++i) sgd_.Step(i, state_[i]);
  return loss;
}

}  // namespace mp
