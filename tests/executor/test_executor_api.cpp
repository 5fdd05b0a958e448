// mp::Executor as a library: training steps change the model's state the
// way mpexec's do, the saved model holds exactly that state, and the
// example program in examples/ runs.
#include "tests/doctest_torch.h"

#include <ATen/Parallel.h>

#include <filesystem>

#include "../graph/zoo.h"
#include "../run_tool.h"
#include "common/error.h"
#include "executor/executor.h"
#include "executor/reference_training.h"
#include "executor/scoped_threads.h"
#include "executor/verify.h"

using mp::test::TempPath;
using mp::test::ZooPath;

namespace {

// `name`: the test's own file name, as ctest runs tests side by side.
std::string MakePlan(const std::string& name, const std::string& file, const std::string& flags) {
  const std::string out = TempPath(name + ".api.plan.yaml");
  const auto run = mp::test::RunTool(MP_MPPLAN, ZooPath(file) + " --quiet --device-profile a100-80gb -o " + out + " " + flags);
  INFO(run.out);
  REQUIRE(run.status == 0);
  return out;
}

}  // namespace

TEST_CASE("Executor trains in place, matches the one-device reference, and saves what it trained") {
  const std::string plan = MakePlan("branchy.train", "branchy.script.pt", "--gpus 3 --stages 3 --microbatches 3 --batch 6 --schedule 1f1b");
  mp::ExecutorOptions options;
  options.training.optimizer.lr = 0.05;
  options.training.optimizer.momentum = 0.5;
  mp::Executor exec(plan, options);
  const auto inputs = exec.SyntheticInputs(3);
  const at::Tensor labels = exec.SyntheticLabels(3);
  mp::ReferenceTrainer reference(exec.loaded(), exec.State(), options.training, true);
  double first = 0, last = 0;
  for (int step = 0; step < 4; ++step) {
    const mp::PipelineRun run = exec.TrainStep(inputs, labels);
    const double want = reference.Step(inputs, labels);
    CHECK(run.loss == doctest::Approx(want).epsilon(1e-5));
    (step == 0 ? first : last) = run.loss;
  }
  CHECK(last < first);  // four steps on one batch lower its loss
  const mp::StateComparison same = mp::CompareState(exec.State(), reference.State(), exec.StateNames(), 1e-5);
  CHECK_MESSAGE(same.ok, same.worst << " differs by " << same.max_relative_diff);

  const std::string saved = TempPath("branchy.api.trained.pt");
  std::filesystem::remove(saved);
  exec.SaveModel(saved);
  torch::jit::Module module = torch::jit::load(saved);
  std::map<std::string, at::Tensor> trained;
  for (const auto& p : module.named_parameters()) trained[p.name] = p.value;
  const auto names = exec.StateNames();
  const auto state = exec.State();
  int compared = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    auto it = trained.find(names[i]);
    if (it == trained.end()) continue;  // buffers
    CHECK_MESSAGE(at::equal(it->second, state[i]), names[i]);
    ++compared;
  }
  CHECK(compared == int(trained.size()));
  CHECK_THROWS_WITH_AS(exec.SaveModel(plan), doctest::Contains("refusing to overwrite"), mp::InputError);
}

TEST_CASE("Executor steps with the plan's optimizer at the learning rate a schedule sets") {
  const std::string plan = MakePlan("mlp.lr", "mlp.script.pt", "--gpus 2 --stages 2 --microbatches 2 --batch 8 --optimizer adamw");
  mp::Executor exec(plan);
  CHECK(exec.optimizer().settings().Name() == "adamw");
  const auto inputs = exec.SyntheticInputs();
  const at::Tensor labels = exec.SyntheticLabels();
  const auto before = exec.State();
  exec.SetLearningRate(0);  // a warm-up's first step: nothing moves, weight decay included
  exec.TrainStep(inputs, labels);
  const mp::StateComparison still = mp::CompareState(exec.State(), before, exec.StateNames(), 0);
  CHECK_MESSAGE(still.ok, still.worst << " moved by " << still.max_relative_diff);
  exec.SetLearningRate(0.01);
  exec.TrainStep(inputs, labels);
  CHECK_FALSE(mp::CompareState(exec.State(), before, exec.StateNames(), 1e-3).ok);
}

TEST_CASE("Executor refuses to train an inference plan and infers on tensors") {
  mp::Executor exec(MakePlan("mlp.infer", "mlp.script.pt", "--gpus 2 --mode infer --microbatches 2"));
  const auto inputs = exec.SyntheticInputs();
  CHECK_THROWS_WITH_AS(exec.TrainStep(inputs, at::zeros({1})), doctest::Contains("inference plan"), mp::InputError);
  const mp::PipelineRun run = exec.Infer(inputs);
  const mp::Verification v = mp::Verify(run.outputs, mp::RunWholeMicrobatches(exec.loaded(), inputs));
  CHECK(v.ok);
}

TEST_CASE("the thread that steps an Executor runs one intra-op thread, and keeps it after the step") {
  // A team of its own would outlive its work and make the stages' teams
  // wait on futexes; set and restored around every step, the count cost
  // every step's first forward (executor/scoped_threads.h).
  const int before = at::get_num_threads();
  at::set_num_threads(2);
  mp::ExecutorOptions options;
  options.pipeline.threads_per_stage = 2;
  mp::Executor exec(MakePlan("mlp.threads", "mlp.script.pt", "--gpus 2 --mode infer --microbatches 2"), options);
  const auto inputs = exec.SyntheticInputs();
  exec.Infer(inputs);
  CHECK(at::get_num_threads() == 1);
  exec.Infer(inputs);
  CHECK(at::get_num_threads() == 1);
  at::set_num_threads(before);
}

TEST_CASE("work on a thread of its own runs at the count asked, rethrows what it throws, and leaves ours") {
  const int before = at::get_num_threads();
  int seen = 0;
  mp::RunOnOwnThread(3, [&] { seen = at::get_num_threads(); });
  CHECK(seen == 3);
  CHECK(at::get_num_threads() == before);
  CHECK_THROWS_WITH_AS(mp::RunOnOwnThread(2, [] { throw mp::InputError("bad plan key 'x'"); }),
                       "bad plan key 'x'", mp::InputError);
  CHECK(at::get_num_threads() == before);
}

TEST_CASE("the example program in examples/ trains a plan and saves the model") {
  const std::string plan = MakePlan("mlp.example", "mlp.script.pt", "--gpus 2 --microbatches 4 --batch 8");
  const std::string saved = TempPath("mlp.example.trained.pt");
  std::filesystem::remove(saved);
  const auto run = mp::test::RunTool(MP_EXAMPLE, plan + " " + saved);
  INFO(run.out);
  CHECK(run.status == 0);
  CHECK(run.out.find("step 2: loss ") != std::string::npos);
  CHECK(std::filesystem::exists(saved));
}

TEST_CASE("a model that writes into its input leaves the caller's tensors as they were") {
  // inputwrite: x.add_(shift) on the model input first, x read again at the end.
  const std::string plan =
      MakePlan("inputwrite.infer", "inputwrite.trace.pt", "--gpus 2 --stages 2 --microbatches 2 --mode infer");
  mp::Executor exec(plan);
  const auto inputs = exec.SyntheticInputs(5);
  const at::Tensor before = inputs.at(0).toTensor().clone();
  const mp::PipelineRun first = exec.Infer(inputs);
  CHECK(torch::equal(inputs.at(0).toTensor(), before));
  const mp::PipelineRun second = exec.Infer(inputs);  // so the same inputs give the same outputs
  mp::test::CheckBitEqual(second.outputs, first.outputs);
  mp::test::CheckBitEqual(first.outputs, mp::RunWholeMicrobatches(exec.loaded(), inputs));
  CHECK(torch::equal(inputs.at(0).toTensor(), before));
}
