// mpexec: runs an mpplan execution plan with micro-batch pipelining.
// This main parses flags, calls the executor and prints what it measured
// next to what the plan predicted; mp::Error becomes one line and exit 1.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <iostream>

#include "common/allocator.h"
#include "common/error.h"
#include "executor/loaded_plan.h"
#include "executor/pipeline.h"
#include "executor/verify.h"
#include "planner/graph/run_graph.h"

int main(int argc, char** argv) {
  mp::KeepFreedMemory();  // as the profiler measured: see common/allocator.h
  CLI::App app{"mpexec: runs an mpplan execution plan with micro-batch pipelining (inference plans, CPU workers)"};
  app.footer(
      "Examples:\n"
      "  mpplan build/models/mlp.script.pt --gpus 2 --mode infer -o mlp.plan.yaml\n"
      "  mpexec mlp.plan.yaml --steps 5 --verify");
  std::string plan_path, device = "cpu";
  int steps = 1;
  bool verify = false, json = false;
  mp::PipelineOptions options;
  app.add_option("plan", plan_path, "plan file written by mpplan (.yaml)")->required();
  app.add_option("--device", device, "where the stages run: cpu (worker threads)")
      ->check(CLI::IsMember({"cpu", "auto"}))
      ->default_str("cpu");
  app.add_option("--threads-per-stage", options.threads_per_stage,
                 "intra-op threads per stage (default: what the plan's profile was measured with)");
  app.add_option("--steps", steps, "steps to run; the median step time is reported")->default_str("1");
  app.add_flag("--verify", verify, "compare the outputs with the model run whole on one device (same micro-batches, bit for bit)");
  app.add_flag("--json", json, "print one JSON object");
  CLI11_PARSE(app, argc, argv);
  try {
    if (steps < 1) throw mp::InputError(mp::Concat("--steps must be at least 1, got ", steps));
    const mp::LoadedPlan loaded = mp::LoadPlanForRun(plan_path);
    const std::vector<c10::IValue> inputs = mp::SyntheticInputs(loaded.plan.inputs);
    std::vector<double> step_ms;
    mp::PipelineRun run;
    for (int i = 0; i < steps; ++i) {
      run = mp::RunInference(loaded, inputs, options);
      step_ms.push_back(run.step_ms);
    }
    std::sort(step_ms.begin(), step_ms.end());
    const double median = step_ms[step_ms.size() / 2];
    const double predicted = loaded.plan.predicted.step_ms;
    nlohmann::json out = {{"plan", plan_path},
                          {"stages", loaded.stages.size()},
                          {"microbatches", loaded.plan.microbatches},
                          {"schedule", mp::ScheduleName(loaded.plan.schedule)},
                          {"steps", steps},
                          {"step_ms", median},
                          {"predicted_step_ms", predicted},
                          {"measured_vs_predicted", predicted > 0 ? median / predicted : 0.0},
                          {"busy_ms", run.busy_ms}};
    bool verified = true;
    if (verify) {
      // Bit for bit against the same micro-batches run without pipelining;
      // the full batch in one go is only reported (its float sums differ).
      const mp::Verification v = mp::Verify(run.outputs, mp::RunWholeMicrobatches(loaded, inputs));
      const mp::Verification full = mp::Verify(run.outputs, mp::RunWhole(loaded.canonical, inputs), 1e-4, 1e-5);
      out["verify"] = {{"ok", v.ok},
                       {"max_abs_diff", v.max_abs_diff},
                       {"tensors", v.tensors},
                       {"full_batch_max_abs_diff", full.max_abs_diff},
                       {"full_batch_close", full.ok}};
      verified = v.ok;
    }
    if (json) {
      std::cout << out.dump() << "\n";
    } else {
      std::cout << "ran " << plan_path << ": " << loaded.stages.size() << " stages x " << loaded.plan.microbatches
                << " micro-batches, " << steps << " step(s)\n"
                << "step " << median << " ms measured, " << predicted << " ms predicted ("
                << (predicted > 0 ? median / predicted : 0.0) << "x)\n";
      if (verify) {
        std::cout << "verify: " << (verified ? "outputs equal, bit for bit," : "OUTPUTS DIFFER from")
                  << " the model run whole on the same micro-batches; the full batch in one go differs by at most "
                  << out["verify"]["full_batch_max_abs_diff"].get<double>() << "\n";
      }
    }
    return verified ? 0 : 2;
  } catch (const mp::Error& e) {
    std::cerr << "mpexec: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    const std::string what = e.what();
    std::cerr << "mpexec: internal error: " << what.substr(0, what.find('\n')) << "\n";
    return 3;
  }
}
