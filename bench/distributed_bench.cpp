// bench_distributed: the same plan run in one process (a worker thread per
// stage, channels between them) and as one process per stage over c10d
// Gloo on loopback (`mpexec --launch-local K`), side by side, as ratios.
//
// For each case it prints the median step of each transport, their ratio,
// the throughput, and the transport's cost per micro-batch: the extra step
// time over the in-process run divided by the micro-batches, beside the
// bytes a micro-batch sends across the plan's stage boundaries (forward
// values, and in training the gradients back). The two transports run in
// turns, `repeats` times, each turn a fresh mpexec, so a noisy neighbour
// hits both; the ratio is of the medians.
//
// Then replicas: the same two CPU workers used as one pipeline of 2 stages
// (mpplan --replicas 1: threads of one process) or as 2 data-parallel
// replicas of 1 stage (--replicas 2: two processes), each planned and run
// the way mpplan and mpexec do by default, in turns: each one's step
// measured and predicted, and the replicas' gradient all-reduce measured
// (the middle 80%'s mean over every timed step of the runs, each run about
// a second of steps) beside the plan's prediction for it (and beside what the link probe's
// line alone charges it, the prediction before the profile timed the
// model's own all-reduce after a step), with the verdict on issue 29's
// 15% and how far that plan's runs moved among themselves; and the plan
// mpplan chooses by itself (--replicas auto, the default) from the same
// profile, with whether it is the layout that measured faster (issue 29).
//
// Usage: bench_distributed MODELS_DIR OUT_DIR [--quick] [--only transports,replicas]
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bench/median.h"
#include "bench/run_command.h"
#include "bench/same_plan.h"
#include "bench/tool_bench_args.h"
#include "common/atomic_file.h"
#include "planner/plan/plan_reader.h"
#include "planner/profile/profile.h"
#include "planner/profile/profile_file.h"
#include "planner/profile/timer.h"

namespace {

using mp::bench::Median;
using mp::bench::RunCommand;

nlohmann::json RunJson(const std::string& command, const std::string& out) {
  RunCommand(command, out);
  std::ifstream in(out);
  return nlohmann::json::parse(in);
}

struct Tools {
  std::string mpplan, mpexec;
};

struct Case {
  const char *name, *model, *flags;  // mpplan flags beyond stages and mode (GCC 12 misreads string literals here)
  int stages = 2;
  bool training = true;
};

// The same two workers as one 2-stage pipeline and as 2 replicas of 1
// stage: step and all-reduce, measured and predicted.
void BenchReplicas(const Tools& tools, const std::string& models, const std::string& out, bool quick, int repeats,
                   const std::string& steps, nlohmann::json& results) {
  const std::string &mpplan = tools.mpplan, &mpexec = tools.mpexec;
  std::printf("\ncase                    layout        step ms  predicted  error  samples/s  all-reduce ms  predicted"
              "  probe's line\n");
  const std::vector<Case> replica_cases =
      quick ? std::vector<Case>{{"mlp train", "mlp.script.pt", "--batch 64 --microbatches 2", 2, true}}
            : std::vector<Case>{{"mlp train", "mlp.script.pt", "--batch 256 --microbatches 4", 2, true},
                                {"gpt train", "gpt.script.pt", "--batch 16 --microbatches 2", 2, true},
                                {"convnet train", "convnet.script.pt", "--batch 64 --microbatches 2", 2, true},
                                // 97.5 MiB of gradients, six times the link
                                // probe's largest all-reduce
                                {"resnet50 train", "resnet50.script.pt", "--batch 8 --microbatches 2", 2, true}};
  for (const Case& c : replica_cases) {
    std::string file = c.name;
    std::replace(file.begin(), file.end(), ' ', '.');
    // The search's own choice between the two (the default, --replicas
    // auto), planned first: its profile, with the link probe's figures,
    // is the one the other two plans read back.
    const std::string profile = out + "/" + file + ".profile.yaml";
    const std::vector<std::pair<const char*, std::string>> layouts = {
        {"1 x 2 stages", "--replicas 1 --stages 2 --profile-in " + profile},
        {"2 replicas x 1", "--replicas 2 --stages 1 --profile-in " + profile},
        {"auto", "--profile-out " + profile}};
    std::vector<std::vector<nlohmann::json>> runs(layouts.size());
    std::vector<std::string> plans;
    for (size_t l = 0; l < layouts.size(); ++l) {
      plans.push_back(out + "/" + file + ".layout" + std::to_string(l) + ".plan.yaml");
    }
    for (size_t l : {2, 0, 1}) {
      RunCommand(mpplan + " " + models + "/" + c.model + " --quiet --threads 1 --gpus 2 " + layouts[l].second + " " +
              c.flags + " --previous none -o " + plans[l],
          plans[l] + ".out");
    }
    std::vector<mp::Plan> read;
    for (const std::string& plan : plans) read.push_back(mp::ReadPlan(plan));
    // What the link probe's line alone charges the model's gradients (a
    // replica of one stage sums them all), where the profile has both.
    const mp::Profile profiled = mp::ProfileFromYaml(mp::ReadTextFile(profile), profile);
    const mp::Profile::AllReduceAfterStep& after_step = profiled.allreduce_after_step;
    const double probe_line_ms =
        after_step.Measured() ? mp::ProbedAllReduceMs(profiled.allreduce_link, after_step.bytes) : 0;
    // As mpexec runs each by default: a pipeline as threads of one process,
    // replicas as one process per device.
    // Each run steps for about a second: a small sum's slow and fast
    // stretches last longer than the ConvNet's ten 6 ms steps (a run's
    // middle mean read 0.6 to 3.2 ms, five runs in a row).
    std::vector<std::string> stepping;
    for (const mp::Plan& plan : read) {
      const int count = std::clamp(int(1000 / std::max(plan.predicted.step_ms, 1.0)), 10, 100);
      stepping.push_back(quick ? steps : "--warmup 2 --steps " + std::to_string(count));
    }
    for (int r = 0; r < repeats; ++r) {
      for (size_t l = 0; l < layouts.size(); ++l) {
        runs[l].push_back(RunJson(mpexec + " " + plans[l] + " --json --threads-per-stage 1 " + stepping[l],
                                  plans[l] + ".json"));
      }
    }
    std::vector<double> medians;
    for (size_t l = 0; l < layouts.size(); ++l) {
      // The step: the median of the runs' medians. The all-reduce: what a
      // step pays on average, as mpexec takes it within a run (the middle
      // 80%'s mean), over every timed step of the runs.
      std::vector<double> step, allreduce, allreduce_steps;
      for (const auto& j : runs[l]) {
        step.push_back(j.at("step_ms").get<double>());
        const nlohmann::json& stage = j.at("stages").at(0);
        allreduce.push_back(stage.value("allreduce_ms", 0.0));
        const std::vector<double> each = stage.value("allreduce_steps_ms", std::vector<double>());
        allreduce_steps.insert(allreduce_steps.end(), each.begin(), each.end());
      }
      const auto& last = runs[l].back();
      const double predicted = last.at("predicted_step_ms").get<double>();
      const double predicted_allreduce = last.at("stages").at(0).value("predicted_allreduce_ms", 0.0);
      const double ms = Median(step), allreduce_ms = allreduce_steps.empty() ? 0 : mp::MiddleMean(allreduce_steps);
      medians.push_back(ms);
      const bool one_stage = read[l].replicas == 2 && read[l].stages.size() == 1;
      std::printf("%-22s  %-14s %7.1f  %9.1f  %+4.0f%%  %9.1f  %13.1f  %9.1f", c.name, layouts[l].first, ms, predicted,
                  (ms / predicted - 1) * 100, last.at("batch").get<double>() * 1000.0 / ms, allreduce_ms,
                  predicted_allreduce);
      if (one_stage && probe_line_ms > 0) {
        std::printf("  %12.1f\n", probe_line_ms);
      } else {
        std::printf("  %12s\n", "-");
      }
      if (one_stage && predicted_allreduce > 0) {
        // Issue 29's target: the all-reduce predicted within 15% of the
        // measured one. Beside it, how far the runs of this one plan moved
        // among themselves (each the middle mean of its steps): a
        // prediction that misses by less than that cannot be told from the noise.
        const auto [low, high] = std::minmax_element(allreduce.begin(), allreduce.end());
        const double error = allreduce_ms / predicted_allreduce - 1;
        const bool inside = *low <= predicted_allreduce && predicted_allreduce <= *high;
        std::printf("%-22s  %-14s all-reduce %.1f ms measured (runs %.1f to %.1f, %.0f%% apart), %.1f predicted: "
                    "%+.0f%%, %s\n",
                    c.name, layouts[l].first, allreduce_ms, *low, *high, 100 * (*high / std::max(*low, 1e-9) - 1),
                    predicted_allreduce, 100 * error,
                    std::abs(error) <= 0.15 ? "within 15%, ok"
                    : inside                ? "MISSED 15%, but inside the runs' own spread"
                                            : "MISSED 15%");
      }
      results.push_back({{"case", c.name},
                         {"layout", layouts[l].first},
                         {"step_ms", ms},
                         {"predicted_step_ms", predicted},
                         {"allreduce_ms", allreduce_ms},
                         {"allreduce_runs_ms", allreduce},
                         {"predicted_allreduce_ms", predicted_allreduce},
                         {"probe_line_allreduce_ms", one_stage ? probe_line_ms : 0.0},
                         {"steps_ms", step}});
    }
    // Did auto choose the layout that measured faster?
    const mp::Plan& chose = read[2];
    // Auto may also choose neither (fewer devices, within the device
    // tolerance): then it must measure no slower than the faster layout.
    const size_t same = chose.replicas > 1 ? 1 : 0, other = 1 - same;
    const bool is_layout = chose.replicas * chose.programs.size() == 2;
    if (is_layout) {
      // Where auto's plan is the layout's own, the two ran the same plan:
      // their difference is this run's noise, and a choice slower by less
      // than it is a tie, not a miss.
      const bool identical = mp::bench::SamePlan(read[same], chose);
      const double noise = identical ? std::abs(medians[2] - medians[same]) / std::min(medians[2], medians[same]) : 0;
      const char* verdict = medians[same] <= medians[other]                 ? "the faster, ok"
                            : medians[same] <= medians[other] * (1 + noise) ? "slower within the noise, a tie"
                                                                            : "MISSED";
      std::printf("%-22s  auto chose %d replica(s) x %zu stage(s): %s (measured %.1f against %.1f ms", c.name,
                  chose.replicas, chose.stages.size(), verdict, medians[same], medians[other]);
      if (identical) std::printf("; the same plan twice %.1f%% apart", noise * 100);
      std::printf(")\n");
    } else {
      const double best = std::min(medians[0], medians[1]);
      std::printf("%-22s  auto chose %d replica(s) x %zu stage(s) on %zu device(s), neither layout: %s (measured "
                  "%.1f against the faster layout's %.1f ms)\n",
                  c.name, chose.replicas, chose.stages.size(), chose.programs.size() * size_t(chose.replicas),
                  medians[2] <= best ? "no slower, ok" : "MISSED", medians[2], best);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const auto args = mp::bench::ParseToolBenchArgs(argc, argv, "bench_distributed");
  if (!args) return 2;
  const std::string &models = args->models, &out = args->out;
  const bool quick = args->quick;
  const Tools tools{args->mpplan, args->mpexec};
  const std::string &mpplan = tools.mpplan, &mpexec = tools.mpexec;
  const int repeats = quick ? 1 : 5;
  const std::string steps = quick ? "--warmup 1 --steps 2" : "--warmup 2 --steps 10";
  const std::vector<Case> cases =
      quick ? std::vector<Case>{{"mlp train", "mlp.script.pt", "--batch 64 --microbatches 4", 2, true}}
            : std::vector<Case>{
                  {"mlp train", "mlp.script.pt", "--batch 256 --microbatches 8", 2, true},
                  {"mlp infer", "mlp.script.pt", "--batch 256 --microbatches 8", 2, false},
                  {"gpt train", "gpt.script.pt", "--batch 16 --microbatches 4", 2, true},
                  {"resnet50 64x64 train", "resnet50.script.pt", "--input float32[32,3,64,64] --microbatches 4", 2,
                   true},
              };
  if (args->Wants("transports")) {
    std::printf("case                    stages  M   in-process ms  processes ms  ratio  samples/s (in, proc)  "
                "cost/mb ms  bytes/mb\n");
  }
  nlohmann::json results = nlohmann::json::array();
  try {
    for (const Case& c : args->Wants("transports") ? cases : std::vector<Case>{}) {
      std::string file = c.name;
      std::replace(file.begin(), file.end(), ' ', '.');
      const std::string plan = out + "/" + file + ".plan.yaml";
      // 1 thread per stage: the processes get what the threads got.
      RunCommand(mpplan + " " + models + "/" + c.model + " --quiet --threads 1 --gpus " + std::to_string(c.stages) +
              " --stages " + std::to_string(c.stages) + " --mode " + (c.training ? "train" : "infer") + " " + c.flags +
              " --previous none -o " + plan,
          plan + ".out");
      const mp::Plan p = mp::ReadPlan(plan);
      int64_t bytes = 0;  // per micro-batch across every boundary
      for (const auto& stage : p.stages) {
        for (const auto& t : stage.sends) bytes += t.bytes * (c.training && t.gradient ? 2 : 1);
      }
      std::vector<double> in, proc;
      for (int r = 0; r < repeats; ++r) {
        for (int transport = 0; transport < 2; ++transport) {
          const std::string json = plan + (transport ? ".processes.json" : ".in-process.json");
          const std::string launch = transport ? " --launch-local " + std::to_string(c.stages) : "";
          RunCommand(mpexec + " " + plan + " --json --threads-per-stage 1 " + steps + launch, json);
          std::ifstream file_in(json);
          const double ms = nlohmann::json::parse(file_in).at("step_ms").get<double>();
          (transport ? proc : in).push_back(ms);
        }
      }
      const double a = Median(in), b = Median(proc);
      const double cost = (b - a) / p.microbatches;
      std::printf("%-22s  %6d  %-2d  %13.1f  %12.1f  %5.3f  %9.1f, %9.1f  %10.2f  %8.0f KiB\n", c.name,
                  c.stages, p.microbatches, a, b, b / a, p.batch * 1000.0 / a, p.batch * 1000.0 / b, cost,
                  bytes / 1024.0);
      results.push_back({{"case", c.name},
                         {"stages", c.stages},
                         {"microbatches", p.microbatches},
                         {"in_process_step_ms", a},
                         {"processes_step_ms", b},
                         {"ratio", b / a},
                         {"transport_cost_per_microbatch_ms", cost},
                         {"bytes_per_microbatch", bytes},
                         {"in_process_steps_ms", in},
                         {"processes_steps_ms", proc}});
    }

    if (args->Wants("replicas")) BenchReplicas(tools, models, out, quick, repeats, steps, results);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_distributed: %s\n", e.what());
    return 1;
  }
  std::ofstream(out + "/distributed.json") << results.dump(2) << "\n";
  std::printf("raw figures: %s/distributed.json\n", out.c_str());
  return 0;
}
