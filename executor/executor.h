// mp::Executor: mpexec as a library. Load a plan once, then run inference
// on tensors or training steps, from C++ without the command line:
//
//   mp::Executor exec("mlp.plan.yaml");
//   auto inputs = exec.SyntheticInputs();
//   mp::PipelineRun step = exec.TrainStep(inputs, exec.SyntheticLabels());
//   exec.SaveModel("mlp.trained.pt");
//
// See examples/train_and_infer.cpp.
#pragma once

#include <ATen/core/ivalue.h>

#include <memory>
#include <string>
#include <vector>

#include "common/worker_pool.h"
#include "executor/loaded_plan.h"
#include "executor/pipeline.h"
#include "executor/training.h"

namespace mp {

struct ExecutorOptions {
  // A model file to run in place of the plan's (mpexec --model): the same
  // canonical graph, other weights; "" runs the plan's own.
  std::string model;
  PipelineOptions pipeline;
  TrainingOptions training;  // loss and optimizer (training plans)
};

class Executor {
 public:
  // LoadPlanForRun: throws InputError for a bad plan or a changed model.
  explicit Executor(const std::string& plan_path, const ExecutorOptions& options = {});

  const Plan& plan() const { return loaded_.plan; }
  const LoadedPlan& loaded() const { return loaded_; }
  const ExecutorOptions& options() const { return options_; }

  // Deterministic inputs from the plan's spec, and labels for the loss.
  std::vector<c10::IValue> SyntheticInputs(uint64_t seed = 0) const;
  at::Tensor SyntheticLabels(uint64_t seed = 0) const;
  // Labels the caller brings: InputError naming `what` unless they fit.
  void CheckLabels(const at::Tensor& labels, const std::string& what = "labels") const;

  // One step at a time: not for calls from several threads at once. The
  // stages' threads are kept from step to step, and the calling thread
  // runs one intra-op thread, and keeps it after the step (UseThreads,
  // RunOnOwnThread, scoped_threads.h: a team of its own would make the
  // stages' wait on futexes; setting it back every step cost every step).
  // Inference plans: the whole batch's outputs, pipelined (run.outputs).
  PipelineRun Infer(const std::vector<c10::IValue>& inputs) const;
  // Training plans: forward, backward and an optimizer step on the whole
  // batch (run.loss); the model's state changes in place.
  PipelineRun TrainStep(const std::vector<c10::IValue>& inputs, const at::Tensor& labels);
  // Whether the next steps sample the heap's peak (PipelineOptions::sample_heap).
  void SampleHeap(bool on) { options_.pipeline.sample_heap = on; }

  // The optimizer (training plans): its state after the steps so far.
  // InputError from the constructor where the flags do not fit it
  // (ResolveOptimizer).
  const Optimizer& optimizer() const { return optimizer_; }
  Optimizer& optimizer() { return optimizer_; }
  // The learning rate of the next steps, for a schedule the caller runs
  // (warm-up, cosine decay), as one sets param_group["lr"] in PyTorch.
  void SetLearningRate(double lr) { optimizer_.SetLearningRate(lr); }

  // The parameters and buffers (canonical order, names alike), cloned.
  std::vector<at::Tensor> State() const;
  // Their gradients after the last step (clipped where asked), cloned;
  // zeros where none (a buffer, a frozen weight; under processes, another
  // rank's parameter).
  std::vector<at::Tensor> Gradients() const;
  std::vector<std::string> StateNames() const;

  // The optimizer's state (optimizer_file.h): written, never over the plan
  // or its model; read back into a run resumed from a SaveModel file (the
  // parameters this rank steps).
  void SaveOptimizerState(const std::string& path, std::vector<std::string> protected_paths = {}) const;
  void LoadOptimizerState(const std::string& path);

  // The model with its current state as TorchScript (SaveTrainedModel),
  // never over the plan or its model.
  void SaveModel(const std::string& path, std::vector<std::string> protected_paths = {}) const;

 private:
  // `paths` and the plan's own files, which nothing is written over.
  std::vector<std::string> Protected(std::vector<std::string> paths) const;

  LoadedPlan loaded_;
  ExecutorOptions options_;
  Optimizer optimizer_;
  mutable int64_t steps_ = 0;  // Infer and TrainStep calls so far: the step of the random ops' key
  std::unique_ptr<WorkerPool> workers_ = std::make_unique<WorkerPool>();  // the stages' threads
};

}  // namespace mp
