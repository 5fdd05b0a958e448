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
// Usage: bench_distributed MODELS_DIR OUT_DIR [--quick]
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "planner/plan/plan_reader.h"

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Runs `command`, its stdout into `out`, its stderr into `out`.log.
void Run(const std::string& command, const std::string& out) {
  if (std::system((command + " > " + out + " 2> " + out + ".log").c_str()) != 0) {
    throw std::runtime_error("failed: " + command + " (see " + out + ".log)");
  }
}

struct Case {
  std::string name, model, flags;  // mpplan flags beyond stages and mode
  int stages = 2;
  bool training = true;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_distributed MODELS_DIR OUT_DIR [--quick]\n");
    return 2;
  }
  const std::string models = argv[1], out = argv[2];
  const bool quick = argc > 3 && std::string(argv[3]) == "--quick";
  const std::string apps = (std::filesystem::path(argv[0]).parent_path() / ".." / "apps").string();
  const std::string mpplan = apps + "/mpplan", mpexec = apps + "/mpexec";
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::filesystem::create_directories(out);
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
  std::printf("case                    stages  M   in-process ms  processes ms  ratio  samples/s (in, proc)  "
              "cost/mb ms  bytes/mb\n");
  nlohmann::json results = nlohmann::json::array();
  try {
    for (const Case& c : cases) {
      std::string file = c.name;
      std::replace(file.begin(), file.end(), ' ', '.');
      const std::string plan = out + "/" + file + ".plan.yaml";
      // 1 thread per stage: the processes get what the threads got.
      Run(mpplan + " " + models + "/" + c.model + " --quiet --threads 1 --gpus " + std::to_string(c.stages) +
              " --stages " + std::to_string(c.stages) + " --mode " + (c.training ? "train" : "infer") + " " + c.flags +
              " -o " + plan,
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
          Run(mpexec + " " + plan + " --json --threads-per-stage 1 " + steps + launch, json);
          std::ifstream file_in(json);
          const double ms = nlohmann::json::parse(file_in).at("step_ms").get<double>();
          (transport ? proc : in).push_back(ms);
        }
      }
      const double a = Median(in), b = Median(proc);
      const double cost = (b - a) / p.microbatches;
      std::printf("%-22s  %6d  %-2d  %13.1f  %12.1f  %5.3f  %9.1f, %9.1f  %10.2f  %8.0f KiB\n", c.name.c_str(),
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
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_distributed: %s\n", e.what());
    return 1;
  }
  std::ofstream(out + "/distributed.json") << results.dump(2) << "\n";
  std::printf("raw figures: %s/distributed.json\n", out.c_str());
  return 0;
}
