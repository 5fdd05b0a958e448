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
// the way mpplan and mpexec do by default, in 3 turns, each profiling the
// model afresh and running each plan twice: each one's step measured and
// predicted, and the replicas' gradient all-reduce measured (the middle
// 80%'s mean over every timed step of the turn's runs, each run about a
// second of steps) beside the plan's prediction for it (and beside what
// the link probe's line alone charges it, the prediction before the
// profile timed the model's own all-reduce after a step), with the
// verdict on issue 29's 15% in the median turn and how far that plan's
// runs moved among themselves; and the plan mpplan chooses by itself
// (--replicas auto, the default) from the turn's profile, with whether it
// is the layout that measured faster in that turn, and in most turns
// (issue 29).
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
using mp::bench::MedianOver;
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

// One layout's plan in one turn (a profile of its own): its runs' step and
// all-reduce, measured and predicted.
struct LayoutTurn {
  mp::Plan read;
  double step_ms = 0, predicted_ms = 0;   // the median of the runs' steps
  double allreduce_ms = 0;                // the middle mean over every timed step of the runs
  double predicted_allreduce_ms = 0;
  std::vector<double> allreduce_runs_ms;  // each run's middle mean
  std::vector<double> steps_ms;           // each run's median step
  double samples_per_s = 0;
};

// The same two workers as one 2-stage pipeline and as 2 replicas of 1
// stage: step and all-reduce, measured and predicted, in turns.
void BenchReplicas(const Tools& tools, const std::string& models, const std::string& out, bool quick,
                   const std::string& steps, nlohmann::json& results) {
  const std::string &mpplan = tools.mpplan, &mpexec = tools.mpexec;
  const int turn_count = quick ? 1 : 3, runs_per_turn = quick ? 1 : 2;
  std::printf("\ncase                    layout        step ms  predicted  error  samples/s  all-reduce ms  predicted"
              "  probe's line   (median turn of %d)\n",
              turn_count);
  const std::vector<Case> replica_cases =
      quick ? std::vector<Case>{{"mlp train", "mlp.script.pt", "--batch 64 --microbatches 2", 2, true}}
            : std::vector<Case>{{"mlp train", "mlp.script.pt", "--batch 256 --microbatches 4", 2, true},
                                {"gpt train", "gpt.script.pt", "--batch 16 --microbatches 2", 2, true},
                                {"convnet train", "convnet.script.pt", "--batch 64 --microbatches 2", 2, true},
                                // 97.5 MiB of gradients, six times the link
                                // probe's largest all-reduce
                                {"resnet50 train", "resnet50.script.pt", "--batch 8 --microbatches 2", 2, true}};
  const std::vector<const char*> names = {"1 x 2 stages", "2 replicas x 1", "auto"};
  for (const Case& c : replica_cases) {
    std::string file = c.name;
    std::replace(file.begin(), file.end(), ' ', '.');
    std::vector<std::vector<LayoutTurn>> turns;  // [turn][layout]
    std::vector<double> probe_lines;             // [turn]
    std::vector<size_t> chosen;                  // [turn]: the layout auto chose, 2: neither
    std::vector<double> noises;                  // auto against the layout whose plan it is, where it is
    std::string choices;
    for (int t = 0; t < turn_count; ++t) {
      // A profile a turn: the all-reduce's prediction is the probe's
      // minute after a step, and a small sum's slow and fast stretches
      // moved between the probe's minute and the runs' (the ConvNet's probe
      // read 1.3 to 2.0 ms in four runs of this bench). The search's own
      // choice (the default, --replicas auto) is planned first: its
      // profile, with the link probe's figures, is the one the other two
      // plans read back.
      const std::string prefix = out + "/" + file + ".t" + std::to_string(t + 1);
      const std::string profile = prefix + ".profile.yaml";
      const std::vector<std::string> flags = {"--replicas 1 --stages 2 --profile-in " + profile,
                                              "--replicas 2 --stages 1 --profile-in " + profile,
                                              "--profile-out " + profile};
      std::vector<std::string> plans;
      for (size_t l = 0; l < flags.size(); ++l) plans.push_back(prefix + ".layout" + std::to_string(l) + ".plan.yaml");
      for (size_t l : {2, 0, 1}) {
        RunCommand(mpplan + " " + models + "/" + c.model + " --quiet --threads 1 --gpus 2 " + flags[l] + " " +
                       c.flags + " --previous none -o " + plans[l],
                   plans[l] + ".out");
      }
      std::vector<LayoutTurn> layouts(plans.size());
      for (size_t l = 0; l < plans.size(); ++l) layouts[l].read = mp::ReadPlan(plans[l]);
      // What the link probe's line alone charges the model's gradients (a
      // replica of one stage sums them all), where the profile has both.
      const mp::Profile profiled = mp::ProfileFromYaml(mp::ReadTextFile(profile), profile);
      const mp::Profile::AllReduceAfterStep& after_step = profiled.allreduce_after_step;
      probe_lines.push_back(after_step.Measured() ? mp::ProbedAllReduceMs(profiled.allreduce_link, after_step.bytes)
                                                  : 0);
      // As mpexec runs each by default: a pipeline as threads of one
      // process, replicas as one process per device. Each run steps for
      // about a second: a small sum's slow and fast stretches last longer
      // than the ConvNet's ten 6 ms steps (a run's middle mean read 0.6 to
      // 3.2 ms, five runs in a row).
      std::vector<std::vector<nlohmann::json>> runs(plans.size());
      for (int r = 0; r < runs_per_turn; ++r) {
        for (size_t l = 0; l < plans.size(); ++l) {
          const int count = std::clamp(int(1000 / std::max(layouts[l].read.predicted.step_ms, 1.0)), 10, 100);
          const std::string stepping = quick ? steps : "--warmup 2 --steps " + std::to_string(count);
          runs[l].push_back(RunJson(mpexec + " " + plans[l] + " --json --threads-per-stage 1 " + stepping,
                                    plans[l] + ".json"));
        }
      }
      for (size_t l = 0; l < plans.size(); ++l) {
        // The step: the median of the runs' medians. The all-reduce: what
        // a step pays on average, as mpexec takes it within a run (the
        // middle 80%'s mean), over every timed step of the runs.
        LayoutTurn& lt = layouts[l];
        std::vector<double> allreduce_steps;
        for (const auto& j : runs[l]) {
          lt.steps_ms.push_back(j.at("step_ms").get<double>());
          const nlohmann::json& stage = j.at("stages").at(0);
          lt.allreduce_runs_ms.push_back(stage.value("allreduce_ms", 0.0));
          const std::vector<double> each = stage.value("allreduce_steps_ms", std::vector<double>());
          allreduce_steps.insert(allreduce_steps.end(), each.begin(), each.end());
        }
        const auto& last = runs[l].back();
        lt.step_ms = Median(lt.steps_ms);
        lt.predicted_ms = last.at("predicted_step_ms").get<double>();
        lt.predicted_allreduce_ms = last.at("stages").at(0).value("predicted_allreduce_ms", 0.0);
        lt.allreduce_ms = allreduce_steps.empty() ? 0 : mp::MiddleMean(allreduce_steps);
        lt.samples_per_s = last.at("batch").get<double>() * 1000.0 / lt.step_ms;
        std::fprintf(stderr, "replicas %s turn %d: %s step %.1f / %.1f ms, all-reduce %.1f / %.1f ms\n", c.name, t + 1,
                     names[l], lt.step_ms, lt.predicted_ms, lt.allreduce_ms, lt.predicted_allreduce_ms);
        results.push_back({{"case", c.name},
                           {"turn", t + 1},
                           {"layout", names[l]},
                           {"step_ms", lt.step_ms},
                           {"predicted_step_ms", lt.predicted_ms},
                           {"allreduce_ms", lt.allreduce_ms},
                           {"allreduce_runs_ms", lt.allreduce_runs_ms},
                           {"predicted_allreduce_ms", lt.predicted_allreduce_ms},
                           {"probe_line_allreduce_ms", l == 1 ? probe_lines.back() : 0.0},
                           {"steps_ms", lt.steps_ms}});
      }
      // What auto chose: one of the two layouts (and whether its plan is
      // that layout's own, file for file), or neither.
      const mp::Plan& chose = layouts[2].read;
      const bool is_layout = chose.replicas * chose.programs.size() == 2;
      const size_t layout = !is_layout ? 2 : chose.replicas > 1 ? 1 : 0;
      chosen.push_back(layout);
      const double auto_ms = layouts[2].step_ms;
      if (is_layout && mp::bench::SamePlan(layouts[layout].read, chose)) {
        noises.push_back(std::abs(auto_ms - layouts[layout].step_ms) / std::min(auto_ms, layouts[layout].step_ms));
      }
      choices += (choices.empty() ? "" : ", ") + std::to_string(chose.replicas) + " x " +
                 std::to_string(chose.stages.size()) + (is_layout ? "" : " (neither layout)");
      turns.push_back(std::move(layouts));
    }
    // A layout's figure over the turns: the median of f(its LayoutTurn).
    const auto over_turns = [&](size_t l, auto f) {
      return MedianOver(turns, [&](const std::vector<LayoutTurn>& turn) { return f(turn[l]); });
    };
    std::vector<double> step;  // each layout's median turn
    for (size_t l = 0; l < names.size(); ++l) {
      step.push_back(over_turns(l, [](const LayoutTurn& lt) { return lt.step_ms; }));
    }
    for (size_t l = 0; l < names.size(); ++l) {
      const double error = over_turns(l, [](const LayoutTurn& lt) { return lt.step_ms / lt.predicted_ms; });
      const double allreduce = over_turns(l, [](const LayoutTurn& lt) { return lt.allreduce_ms; });
      const double predicted_allreduce = over_turns(l, [](const LayoutTurn& lt) { return lt.predicted_allreduce_ms; });
      const bool one_stage = l == 1;
      std::printf("%-22s  %-14s %7.1f  %9.1f  %+4.0f%%  %9.1f  %13.1f  %9.1f", c.name, names[l], step[l],
                  over_turns(l, [](const LayoutTurn& lt) { return lt.predicted_ms; }), (error - 1) * 100,
                  over_turns(l, [](const LayoutTurn& lt) { return lt.samples_per_s; }), allreduce,
                  predicted_allreduce);
      if (one_stage && Median(probe_lines) > 0) {
        std::printf("  %12.1f\n", Median(probe_lines));
      } else {
        std::printf("  %12s\n", "-");
      }
      if (!one_stage || !(predicted_allreduce > 0)) continue;
      // Issue 29's target: the all-reduce predicted within 15% of the
      // measured one, in the median turn. Beside it each turn's error, and
      // how far the runs of one plan moved among themselves (each the
      // middle mean of its steps): a prediction that misses by less than
      // that cannot be told from the noise.
      std::string each;
      std::vector<double> all_runs;
      for (const auto& turn : turns) {
        const LayoutTurn& lt = turn[l];
        char one[48];
        std::snprintf(one, sizeof one, "%s%.1f / %.1f", each.empty() ? "" : ", ", lt.allreduce_ms,
                      lt.predicted_allreduce_ms);
        each += one;
        all_runs.insert(all_runs.end(), lt.allreduce_runs_ms.begin(), lt.allreduce_runs_ms.end());
      }
      const double ar_error =
          over_turns(l, [](const LayoutTurn& lt) { return lt.allreduce_ms / lt.predicted_allreduce_ms; }) - 1;
      const auto [low, high] = std::minmax_element(all_runs.begin(), all_runs.end());
      std::printf("%-22s  %-14s all-reduce, turns %s ms (runs %.1f to %.1f, %.0f%% apart): the median turn %+.0f%%, "
                  "%s\n",
                  c.name, names[l], each.c_str(), *low, *high, 100 * (*high / std::max(*low, 1e-9) - 1),
                  100 * ar_error, std::abs(ar_error) <= 0.15 ? "within 15%, ok" : "MISSED 15%");
    }
    // Auto's choice: the layout it chose in most turns, against the
    // layouts' steps in the median turn (which layout runs faster does not
    // hang on a turn's profile, and two runs a turn do not tell apart
    // layouts 5% apart). Where auto's plan was the layout's own, the two
    // ran the same plan: their difference (the median turn's) is the
    // noise, and a choice slower by less than it is a tie, not a miss.
    size_t most = 2;
    int votes = 0;
    for (size_t l = 0; l < names.size(); ++l) {
      const int n = int(std::count(chosen.begin(), chosen.end(), l));
      if (n > votes) most = l, votes = n;
    }
    if (most < 2) {
      const double mine = step[most], theirs = step[1 - most], noise = noises.empty() ? 0 : Median(noises);
      std::printf("%-22s  auto chose %s: %s in %d of %zu turns, %s (%.1f against %.1f ms; the same plan as auto "
                  "%.1f%% apart)\n",
                  c.name, choices.c_str(), names[most], votes, chosen.size(),
                  mine <= theirs                ? "the faster, ok"
                  : mine <= theirs * (1 + noise) ? "slower within the noise, a tie"
                                                 : "MISSED",
                  mine, theirs, 100 * noise);
    } else {
      const double best = std::min(step[0], step[1]);
      std::printf("%-22s  auto chose %s: neither layout in %d of %zu turns, %s (measured %.1f against the faster "
                  "layout's %.1f ms)\n",
                  c.name, choices.c_str(), votes, chosen.size(), step[2] <= best ? "no slower, ok" : "MISSED", step[2],
                  best);
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

    if (args->Wants("replicas")) BenchReplicas(tools, models, out, quick, steps, results);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_distributed: %s\n", e.what());
    return 1;
  }
  std::ofstream(out + "/distributed.json") << results.dump(2) << "\n";
  std::printf("raw figures: %s/distributed.json\n", out.c_str());
  return 0;
}
