// mp::Executor from C++, without the mpexec command line: load a plan,
// run a few training steps (or an inference pass) on tensors you made, keep
// the trained model. Build: part of the project (build/examples/); run:
//
//   build/apps/mpplan build/models/mlp.script.pt --gpus 2 -o mlp.plan.yaml
//   build/examples/train_and_infer mlp.plan.yaml mlp.trained.pt
#include <torch/script.h>

#include <iostream>

#include "executor/executor.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: train_and_infer PLAN.yaml [TRAINED.pt]\n";
    return 2;
  }
  try {
    mp::ExecutorOptions options;
    options.training.optimizer.name = "adamw";  // default: the plan's (mpplan --optimizer)
    options.training.optimizer.clip_grad_norm = 1.0;
    mp::Executor exec(argv[1], options);
    const mp::Plan& plan = exec.plan();
    std::cout << plan.stages.size() << " stages, " << plan.microbatches << " micro-batches of "
              << plan.microbatch_size << "\n";

    // Any tensors matching the plan's input spec will do; these are random.
    const std::vector<c10::IValue> inputs = exec.SyntheticInputs();
    if (!plan.training) {
      const mp::PipelineRun run = exec.Infer(inputs);
      std::cout << "output 0: " << run.outputs.front().toTensor().sizes() << " in " << run.step_ms << " ms\n";
      return 0;
    }
    const at::Tensor labels = exec.SyntheticLabels();
    for (int step = 0; step < 3; ++step) {
      exec.SetLearningRate(0.01 * (step + 1) / 3);  // a linear warm-up, as a schedule would set it
      const mp::PipelineRun run = exec.TrainStep(inputs, labels);
      std::cout << "step " << step << ": loss " << run.loss << " in " << run.step_ms << " ms\n";
    }
    if (argc > 2) {
      exec.SaveModel(argv[2]);
      std::cout << "saved " << argv[2] << "\n";
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "train_and_infer: " << e.what() << "\n";
    return 1;
  }
}
