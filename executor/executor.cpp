// Executor: a LoadedPlan, the optimizer state that persists across steps,
// and thin calls into RunPipeline.
#include "executor/executor.h"

#include "executor/optimizer_file.h"
#include "executor/reference_training.h"
#include "executor/runtime/gradient_sync.h"
#include "executor/save_model.h"
#include "common/error.h"
#include "planner/graph/run_graph.h"

namespace mp {

Executor::Executor(const std::string& plan_path, const ExecutorOptions& options)
    : loaded_(LoadPlanForRun(plan_path, options.model)),
      options_(options),
      optimizer_(loaded_.canonical.params.size(), ResolveOptimizer(options.training.optimizer, loaded_.plan)) {}

std::vector<c10::IValue> Executor::SyntheticInputs(uint64_t seed) const {
  return mp::SyntheticInputs(loaded_.plan.inputs, seed);
}

at::Tensor Executor::SyntheticLabels(uint64_t seed) const {
  return mp::SyntheticLabels(loaded_.output_layout, loaded_.plan.batch, options_.training.loss, seed);
}

void Executor::CheckLabels(const at::Tensor& labels, const std::string& what) const {
  mp::CheckLabels(labels, loaded_.output_layout, loaded_.plan.batch, options_.training.loss, what);
}

PipelineRun Executor::Infer(const std::vector<c10::IValue>& inputs) const {
  return RunPipeline(loaded_, inputs, nullptr, options_.pipeline, *workers_, steps_++);
}

PipelineRun Executor::TrainStep(const std::vector<c10::IValue>& inputs, const at::Tensor& labels) {
  if (!loaded_.plan.training) {
    throw InputError("this is an inference plan (mode: infer): it has no backward to train with");
  }
  CheckLabels(labels);
  TrainingStep step;
  const LossKind loss = options_.training.loss;
  step.labels = SplitTensor(loaded_.plan, labels, LabelsBatchDim(loaded_.output_layout, loss), "labels");
  step.batch_elements = labels.numel();
  step.loss = loss;
  step.loss_tensor = LossTensor(loaded_.output_layout, loss);
  step.reduction = OwnLossReduction(loaded_.output_layout, loss);
  step.optimizer = &optimizer_;
  return RunPipeline(loaded_, inputs, &step, options_.pipeline, *workers_, steps_++);
}

std::vector<at::Tensor> Executor::State() const { return CloneState(loaded_.canonical); }

std::vector<at::Tensor> Executor::Gradients() const { return GradientsOf(loaded_.canonical.params); }

std::vector<std::string> Executor::StateNames() const {
  std::vector<std::string> names;
  for (const auto& p : loaded_.canonical.params) names.push_back(p.name);
  return names;
}

std::vector<std::string> Executor::Protected(std::vector<std::string> paths) const {
  paths.push_back(loaded_.plan_path);
  paths.push_back(loaded_.model_path);
  paths.push_back(loaded_.planned_model_path);
  return paths;
}

void Executor::SaveOptimizerState(const std::string& path, std::vector<std::string> protected_paths) const {
  mp::SaveOptimizerState(path, optimizer_, loaded_.canonical, Protected(std::move(protected_paths)));
}

void Executor::LoadOptimizerState(const std::string& path) {
  mp::LoadOptimizerState(path, optimizer_, loaded_.canonical, SteppedHere(loaded_, options_.pipeline.distribution));
}

void Executor::SaveModel(const std::string& path, std::vector<std::string> protected_paths) const {
  SaveTrainedModel(loaded_.model, path, Protected(std::move(protected_paths)));
}

}  // namespace mp
