// mpexec: runs an mpplan execution plan with micro-batch pipelining.
// This main parses flags, calls the executor and prints what it measured
// next to what the plan predicted; mp::Error becomes one line and exit 1.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <iostream>

#include "common/allocator.h"
#include "common/atomic_file.h"
#include "common/error.h"
#include "executor/loaded_plan.h"
#include "executor/pipeline.h"
#include "executor/tensor_file.h"
#include "executor/verify.h"
#include "planner/graph/run_graph.h"

int main(int argc, char** argv) {
  mp::KeepFreedMemory();  // as the profiler measured: see common/allocator.h
  CLI::App app{"mpexec: runs an mpplan execution plan with micro-batch pipelining (inference plans, CPU workers)"};
  app.footer(
      "Examples:\n"
      "  mpplan build/models/mlp.script.pt --gpus 2 --mode infer -o mlp.plan.yaml\n"
      "  mpexec mlp.plan.yaml --steps 5 --verify");
  std::string plan_path, device = "cpu", input_file, output_file;
  int steps = 1, warmup = 0;
  bool verify = false, json = false;
  mp::PipelineOptions options;
  app.add_option("plan", plan_path, "plan file written by mpplan (.yaml)")->required();
  app.add_option("--device", device, "where the stages run: cpu (worker threads)")
      ->check(CLI::IsMember({"cpu", "auto"}))
      ->default_str("cpu");
  app.add_option("--threads-per-stage", options.threads_per_stage,
                 "intra-op threads per stage (default: what the plan's profile was measured with)");
  app.add_option("--steps", steps, "steps to time; the median step is reported")->default_str("1");
  app.add_option("--warmup", warmup, "steps run first and not timed")->default_str("0");
  app.add_option("--input", input_file, "model inputs saved with torch.save: a tensor, or a tuple with one per input "
                 "(default: synthetic inputs from the plan's spec)");
  app.add_option("--output", output_file, "write the model's outputs with torch.save format (torch.load reads them)");
  app.add_flag("--verify", verify, "compare the outputs with the model run whole on one device (same micro-batches, bit for bit)");
  app.add_flag("--json", json, "print one JSON object");
  CLI11_PARSE(app, argc, argv);
  try {
    if (steps < 1) throw mp::InputError(mp::Concat("--steps must be at least 1, got ", steps));
    if (warmup < 0) throw mp::InputError(mp::Concat("--warmup must not be negative, got ", warmup));
    const mp::LoadedPlan loaded = mp::LoadPlanForRun(plan_path);
    const std::vector<std::string> protected_paths = {plan_path, loaded.model_path, input_file};
    if (!output_file.empty()) mp::CheckWritable(output_file, protected_paths);
    const std::vector<c10::IValue> inputs = input_file.empty() ? mp::SyntheticInputs(loaded.plan.inputs)
                                                               : mp::LoadInputs(input_file, loaded.plan.inputs);
    std::vector<mp::PipelineRun> runs;
    for (int i = 0; i < warmup + steps; ++i) {
      mp::PipelineRun step = mp::RunInference(loaded, inputs, options);
      if (i >= warmup) runs.push_back(std::move(step));
    }
    // The median step, and its per-stage times.
    std::sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) { return a.step_ms < b.step_ms; });
    const mp::PipelineRun& run = runs[runs.size() / 2];
    const double median = run.step_ms;
    nlohmann::json stages = nlohmann::json::array();
    for (size_t s = 0; s < run.busy_ms.size(); ++s) {
      stages.push_back({{"id", s},
                        {"busy_ms", run.busy_ms[s]},
                        {"idle_ms", median - run.busy_ms[s]},
                        {"predicted_busy_fraction", loaded.plan.stages[s].busy_fraction}});
    }
    const double predicted = loaded.plan.predicted.step_ms;
    nlohmann::json out = {{"plan", plan_path},
                          {"stages", stages},
                          {"samples_per_s", median > 0 ? double(loaded.plan.batch) * 1000.0 / median : 0.0},
                          {"microbatches", loaded.plan.microbatches},
                          {"schedule", mp::ScheduleName(loaded.plan.schedule)},
                          {"steps", steps},
                          {"step_ms", median},
                          {"predicted_step_ms", predicted},
                          {"measured_vs_predicted", predicted > 0 ? median / predicted : 0.0}};
    bool verified = true;
    if (verify) {
      // Bit for bit against the same micro-batches run without pipelining;
      // the full batch in one go is only reported (its float sums differ).
      const mp::Verification v = mp::Verify(run.outputs, mp::RunWholeMicrobatches(loaded, inputs));
      const mp::Verification full = mp::Verify(run.outputs, mp::RunWhole(loaded.canonical, inputs), 1e-4, 1e-5);
      out["verify"] = v.ok;
      out["verify_detail"] = {{"max_abs_diff", v.max_abs_diff},
                              {"tensors", v.tensors},
                              {"full_batch_max_abs_diff", full.max_abs_diff},
                              {"full_batch_close", full.ok}};
      verified = v.ok;
    }
    if (!output_file.empty()) mp::SaveOutputs(output_file, run.outputs, protected_paths);
    if (json) {
      std::cout << out.dump() << "\n";
    } else {
      std::cout << "ran " << plan_path << ": " << loaded.stages.size() << " stages x " << loaded.plan.microbatches
                << " micro-batches, median of " << steps << " step(s)\n"
                << "step " << median << " ms measured, " << predicted << " ms predicted (error "
                << (predicted > 0 ? (median / predicted - 1) * 100 : 0.0) << "%)\n";
      for (const auto& stage : stages) {
        std::cout << "stage " << stage["id"] << ": busy " << stage["busy_ms"].get<double>() << " ms, idle "
                  << stage["idle_ms"].get<double>() << " ms (predicted busy "
                  << stage["predicted_busy_fraction"].get<double>() * 100 << "% of the step)\n";
      }
      if (verify) {
        std::cout << "verify: " << (verified ? "outputs equal, bit for bit," : "OUTPUTS DIFFER from")
                  << " the model run whole on the same micro-batches; the full batch in one go differs by at most "
                  << out["verify_detail"]["full_batch_max_abs_diff"].get<double>() << "\n";
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
