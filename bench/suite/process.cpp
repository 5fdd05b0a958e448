#include "bench/suite/process.h"

#include <sys/wait.h>

#include <algorithm>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

namespace mp::bench {

double Median(std::vector<double> values) {
  if (values.empty()) throw std::runtime_error("no timed steps");
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

std::string Format(const char* format, ...) {
  va_list args, again;
  va_start(args, format);
  va_copy(again, args);
  std::string text(std::max(0, std::vsnprintf(nullptr, 0, format, args)), '\0');
  std::vsnprintf(text.data(), text.size() + 1, format, again);
  va_end(again);
  va_end(args);
  return text;
}

nlohmann::json RunJson(const Suite& suite, const std::string& command, const std::string& stem) {
  const std::string json = suite.out + "/" + stem + ".json", log = suite.out + "/" + stem + ".log";
  const int status = std::system((command + " > '" + json + "' 2> '" + log + "'").c_str());
  // Ctrl-C reaches the child (and its shell), not us: stop the whole run
  // rather than fail one case and go on to the next.
  if (status != -1 && ((WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) ||
                       (WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGINT))) {
    std::fprintf(stderr, "bench_suite: interrupted\n");
    std::exit(130);
  }
  if (status != 0) throw std::runtime_error("failed: " + command + " (see " + log + ")");
  std::ifstream in(json);
  try {
    return nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw std::runtime_error("not one JSON object from: " + command + " (" + json + ": " + e.what() + ")");
  }
}

std::string PlanPath(const Suite& suite, const std::string& name) { return suite.out + "/" + name + ".plan.yaml"; }

nlohmann::json MakePlan(const Suite& suite, const std::string& model, const std::string& flags,
                        const std::string& name) {
  std::string command = suite.mpplan + " " + suite.models + "/" + model + " " + flags + " --threads 1 --json --quiet";
  if (suite.smoke && flags.find("--profile-in") == std::string::npos) command += " --warmup 0 --repeats 1";
  return RunJson(suite, command + " --previous none -o '" + PlanPath(suite, name) + "'", name + ".mpplan");
}

Measure PlanRun(const Suite& suite, const std::string& name, int warmup, int steps) {
  return [&suite, name, warmup, steps](int turn) {
    const auto result =
        RunJson(suite,
                suite.mpexec + " '" + PlanPath(suite, name) + "' --json --threads-per-stage 1 --warmup " +
                    std::to_string(warmup) + " --steps " + std::to_string(steps),
                name + ".mpexec." + std::to_string(turn));
    return result.at("steps_ms").get<std::vector<double>>();
  };
}

std::vector<double> InTurns(const std::vector<Measure>& cases, int turns) {
  std::vector<std::vector<double>> steps(cases.size());
  for (int turn = 0; turn < turns; ++turn) {
    for (size_t c = 0; c < cases.size(); ++c) {
      const auto run = cases[c](turn);
      steps[c].insert(steps[c].end(), run.begin(), run.end());
    }
  }
  std::vector<double> medians;
  for (const auto& s : steps) medians.push_back(Median(s));
  return medians;
}

void MeasurePlans(const Suite& suite, std::vector<PlanCase>& cases, int warmup, int steps, int turns) {
  std::vector<Measure> runs;
  for (const auto& c : cases) runs.push_back(PlanRun(suite, c.name, warmup, steps));
  const auto medians = InTurns(runs, turns);
  for (size_t i = 0; i < cases.size(); ++i) cases[i].measured_ms = medians[i];
}

// The plan's cut as node ranges per stage, "0-15 | 16-31": two partitioners
// that agree show the same text.
std::string Cut(const nlohmann::json& plan) {
  std::string cut;
  for (const auto& stage : plan.at("stage_list")) {
    std::string ranges;
    for (const auto& range : stage.at("nodes")) {
      ranges += Format("%s%d-%d", ranges.empty() ? "" : ",", range.at(0).get<int>(), range.at(1).get<int>());
    }
    cut += (cut.empty() ? "" : " | ") + ranges;
  }
  return cut;
}

nlohmann::json PlanRow(const PlanCase& c) {
  const double predicted = c.plan.at("predicted_step_ms").get<double>();
  return {{"case", c.label},
          {"cut", Cut(c.plan)},
          {"stages", c.plan.at("stages")},
          {"devices", c.plan.at("devices")},
          {"microbatches", c.plan.at("microbatches")},
          {"microbatch_size", c.plan.at("microbatch_size")},
          {"schedule", c.plan.at("schedule")},
          {"partitioner", c.plan.at("partitioner")},
          {"predicted_ms", predicted},
          {"measured_ms", c.measured_ms},
          {"error_pct", 100 * (c.measured_ms / predicted - 1)}};
}

void WriteResult(const Suite& suite, const std::string& file, const std::string& text) {
  std::ofstream out(suite.out + "/" + file);
  out << text;
  if (!out.flush()) throw std::runtime_error("cannot write " + suite.out + "/" + file);
}

}  // namespace mp::bench
