// How bench_suite runs the tools: mpplan and mpexec as a user would, each
// in a fresh process with its stdout (one JSON object) and stderr kept
// under the results folder, and the medians it reports.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

#include "bench/suite/suite.h"

namespace mp::bench {

double Median(std::vector<double> values);

// printf into a std::string.
std::string Format(const char* format, ...) __attribute__((format(printf, 1, 2)));

// Runs `command` with stdout into STEM.json and stderr into STEM.log under
// suite.out, and parses the JSON. Throws naming the command and the log.
nlohmann::json RunJson(const Suite& suite, const std::string& command, const std::string& stem);

// `mpplan MODEL FLAGS --json --quiet -o OUT/NAME.plan.yaml`: the plan's
// JSON. The profile flags are added: 1 thread (one core per stage), and in
// a smoke run one timed repeat per node; planned afresh (--previous none),
// whatever OUT holds from an earlier run.
nlohmann::json MakePlan(const Suite& suite, const std::string& model, const std::string& flags,
                        const std::string& name);
std::string PlanPath(const Suite& suite, const std::string& name);

// One run of a case: its timed steps in ms. `turn` numbers its files.
using Measure = std::function<std::vector<double>(int turn)>;

// `mpexec OUT/NAME.plan.yaml --json --warmup W --steps S`, 1 thread per
// stage: mpexec's `steps_ms`.
Measure PlanRun(const Suite& suite, const std::string& name, int warmup, int steps);

// The cases of one comparison measured in turns: `turns` rounds, each
// running every case once, so a noisy neighbour hits all of them. Returns,
// per case, the median of all its timed steps.
std::vector<double> InTurns(const std::vector<Measure>& cases, int turns);

// A plan made for a comparison, and its measured median step.
struct PlanCase {
  std::string label, name;  // what the tables call it; its files' stem
  nlohmann::json plan;      // mpplan --json
  double measured_ms = 0;
};

// Measures every case's plan in turns (InTurns over PlanRun).
void MeasurePlans(const Suite& suite, std::vector<PlanCase>& cases, int warmup, int steps, int turns);

// A case as a flat row: case (its label), cut (node ranges per stage),
// stages, microbatches, microbatch_size, schedule, partitioner,
// predicted_ms, measured_ms, error_pct.
nlohmann::json PlanRow(const PlanCase& c);

// Writes OUT/FILE.
void WriteResult(const Suite& suite, const std::string& file, const std::string& text);

// Where a smoke run's and a full run's choices differ.
template <typename T>
T Pick(const Suite& suite, T smoke, T full) {
  return suite.smoke ? smoke : full;
}

}  // namespace mp::bench
