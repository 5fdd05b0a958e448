#include "bench/exec_threads.h"

#include <nlohmann/json.hpp>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "bench/median.h"
#include "bench/run_command.h"

namespace mp::bench {
namespace {

struct FirstForward {
  double first_ms = 0, later_ms = 0;  // the first forward, the later ones' median
  double wait_ms = 0;                 // from the step's start to its first action
};

// From mpexec's trace of its median step: process 1's actions ("0F3" is
// stage 0's forward of micro-batch 3), in microseconds from the step's start.
FirstForward ReadTrace(const std::string& path) {
  std::ifstream in(path);
  const auto trace = nlohmann::json::parse(in);
  const auto& events = trace.is_object() ? trace.at("traceEvents") : trace;
  FirstForward f;
  f.wait_ms = -1;
  std::vector<double> later;
  for (const auto& e : events) {
    if (e.value("pid", 0) != 1 || e.value("ph", "") != "X") continue;
    const double start_ms = e.at("ts").get<double>() / 1000;
    if (f.wait_ms < 0 || start_ms < f.wait_ms) f.wait_ms = start_ms;
    const std::string name = e.at("name").get<std::string>();
    size_t kind = 0;
    while (kind < name.size() && std::isdigit(static_cast<unsigned char>(name[kind]))) ++kind;
    if (kind == 0 || kind >= name.size() || name[kind] != 'F') continue;
    const double ms = e.at("dur").get<double>() / 1000;
    if (e.at("args").at("microbatch").get<int>() == 0) {
      f.first_ms = ms;
    } else {
      later.push_back(ms);
    }
  }
  f.later_ms = Median(later);
  if (f.wait_ms < 0 || f.first_ms <= 0 || f.later_ms <= 0) throw std::runtime_error("no forwards in " + path);
  return f;
}

}  // namespace

bool ThreadCounts(const std::string& mpplan, const std::string& mpexec, const std::string& models,
                  const std::string& out, bool quick) {
  const std::string plan = out + "/threads.plan.yaml";
  RunCommand(mpplan + " " + models + "/mlp.script.pt --quiet --threads 2 --gpus 1 --stages 1 --replicas 1 --mode train" +
          " --batch 256 --microbatches 8 --schedule 1f1b --previous none -o " + plan,
      plan + ".out");
  const int turns = quick ? 1 : 3;
  const std::vector<int> counts = {2, 1};
  std::vector<std::vector<double>> ratios(counts.size()), waits(counts.size()), drifts(counts.size());
  for (int turn = 0; turn < turns; ++turn) {
    for (size_t c = 0; c < counts.size(); ++c) {
      const std::string base = out + "/threads." + std::to_string(counts[c]);
      RunCommand(mpexec + " " + plan + " --json --warmup 2 --steps " + (quick ? "3" : "10") + " --threads-per-stage " +
              std::to_string(counts[c]) + " --trace " + base + ".trace.json",
          base + ".json");
      const FirstForward f = ReadTrace(base + ".trace.json");
      std::ifstream in(base + ".json");
      const double drift = nlohmann::json::parse(in).at("drift").value("factor", 0.0);
      ratios[c].push_back(f.first_ms / f.later_ms);
      waits[c].push_back(f.wait_ms);
      drifts[c].push_back(drift);
      std::fprintf(stderr,
                   "threads %d a stage (profiled with 2), turn %d: first forward %.2f ms, later %.2f, wait %.2f, "
                   "drift %.2fx\n",
                   counts[c], turn + 1, f.first_ms, f.later_ms, f.wait_ms, drift);
    }
  }
  bool all_ok = true;
  for (size_t c = 0; c < counts.size(); ++c) {
    const double ratio = Median(ratios[c]), wait = Median(waits[c]);
    const bool ok = ratio <= 1.25 && wait < 1.0;
    all_ok = all_ok && ok;
    std::printf("threads     MLP 1 stage x 8, profiled with 2 threads, run with %d: a step's first forward %.2fx its "
                "later ones, %.2f ms before its first action (target: within 1.25x, under 1 ms) %s; drift factor "
                "%.2fx\n",
                counts[c], ratio, wait, ok ? "ok" : "MISSED", Median(drifts[c]));
  }
  return all_ok;
}

}  // namespace mp::bench
