#include "planner/profile/contention.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "common/cpu_affinity.h"
#include "common/dump.h"
#include "common/error.h"
#include "common/sanitizer_build.h"
#include "planner/profile/process_copies.h"
#include "planner/profile/timer.h"
#include "planner/profile/whole_graph.h"

namespace mp {

namespace {

// Turns until they span this long, after the fewest asked for. Under a
// sanitizer the factor means nothing (as the link probe's figures, and
// the after-step probe's): the fewest, not a span of two or more workers
// in every measured plan of the sanitizer jobs' tests.
constexpr double kSpanMs = kUnderSanitizer ? 0 : 400;
constexpr int kMaxTurns = 40;

std::vector<double> Totals(const std::vector<RunTimes>& runs) {
  std::vector<double> totals;
  for (const RunTimes& r : runs) totals.push_back(r.Total());
  return totals;
}

}  // namespace

SharedSlowdownProbe::SharedSlowdownProbe(const CanonicalGraph& canonical,
                                         const std::vector<c10::IValue>& model_inputs, const PassOptions& options,
                                         int workers, int threads, double share, bool processes)
    : count_(workers), share_(share), ratios_(std::max(workers, 1)), speed_ratios_(std::max(workers, 1)) {
  if (workers < 2 || threads < 1)
    throw InternalError(Concat("contention probe: workers ", workers, ", threads ", threads));
  // Each copy on its own inputs, in case the graph writes to them.
  std::vector<std::vector<c10::IValue>> inputs(static_cast<size_t>(workers));
  for (auto& mine : inputs) {
    for (const auto& v : model_inputs) mine.push_back(MapTensors(v, [](const at::Tensor& t) { return t.clone(); }));
  }
  if (processes) {
    copies_ = CopiesInProcesses(canonical, inputs, options, threads);
  } else {
    std::vector<std::unique_ptr<WholeGraph>> graphs;
    for (const auto& mine : inputs) graphs.push_back(std::make_unique<WholeGraph>(canonical, mine, options));
    copies_ = CopiesOnThreads(std::move(graphs), threads);
  }
  pinned_ = !WorkerCpus(0, workers, threads).empty();
  start_ = std::chrono::steady_clock::now();
}

SharedSlowdownProbe::~SharedSlowdownProbe() = default;

void SharedSlowdownProbe::Turn() {
  const auto start = std::chrono::steady_clock::now();
  // Alone and together in the same turn, so a neighbour's load on this
  // shared machine falls on both sides of the ratio. Pinned workers also
  // run alone on each worker's own cores: its speed against worker 0's.
  // The graph alone after an untimed run of it: a turn comes after
  // passes of the profiler's, which left this copy's memory and caches
  // cold, where a copy's sample together is a run after another run.
  copies_->Run(0, 1, 0);
  const RunTimes first = copies_->Run(0, 1, 0)[0];
  std::vector<double> alone{first.Total()};
  for (int w = 1; pinned_ && w < count_; ++w) {
    alone.push_back(copies_->Run(w, 1, 0)[0].Total());
    speed_ratios_[w].push_back(alone[0] > 0 ? alone[w] / alone[0] : 1.0);
  }
  std::string dump;
  if (DumpRequested("probe")) {
    dump = "probe turn " + std::to_string(turns_ + 1) + ": alone";
    for (double ms : alone) dump += " " + std::to_string(ms);
  }
  for (int k = 2; k <= count_; ++k) {
    // Staggered by the time alone: in lockstep the copies ran the same ops
    // at the same moment, which a pipeline's stages never do (in 1F1B one
    // stage's forward runs beside the other's backward), and read 5-20%
    // more (docs/profile.md).
    const std::vector<RunTimes> runs = copies_->Run(0, k, alone[0]);
    const std::vector<double> together = Totals(runs);
    ratios_[k - 1].push_back(alone[0] > 0 ? Quantile(together, 0.5) / alone[0] : 1.0);
    if (!dump.empty()) {
      // The forward and the backward apart (forward+backward): what runs
      // beside a stage may slow its two kinds of work unlike.
      dump += "; " + std::to_string(k) + " at once";
      for (const RunTimes& r : runs) dump += " " + std::to_string(r.forward_ms) + "+" + std::to_string(r.backward_ms);
      dump += " (alone " + std::to_string(first.forward_ms) + "+" + std::to_string(first.backward_ms) + ")";
    }
  }
  if (!dump.empty()) std::fprintf(stderr, "%s\n", dump.c_str());
  spent_ms_ += MsSince(start);
  ++turns_;
}

void SharedSlowdownProbe::MaybeTurn() {
  if (spent_ms_ < share_ * MsSince(start_)) Turn();
}

SharedSlowdown SharedSlowdownProbe::Finish(int min_turns) {
  // Small graphs take more turns: three turns of a 35 ms graph gave 1.02
  // and 1.37 in two runs minutes apart.
  while (turns_ < min_turns || (spent_ms_ < kSpanMs && turns_ < kMaxTurns)) Turn();
  SharedSlowdown result;
  result.factors.push_back(1.0);
  result.turns = turns_;
  std::vector<double> relative;
  for (int k = 2; k <= count_; ++k) {
    const double median = Quantile(ratios_[k - 1], 0.5);
    result.factors.push_back(std::max(1.0, median));
    for (double r : ratios_[k - 1]) relative.push_back(median > 0 ? r / median : 1.0);
  }
  // Pinned: the cores' speeds, the median over the turns, and their spread
  // in the band.
  if (pinned_) result.speeds.push_back(1.0);
  for (int w = 1; pinned_ && w < count_; ++w) {
    const double median = Quantile(speed_ratios_[w], 0.5);
    result.speeds.push_back(median);
    for (double r : speed_ratios_[w]) relative.push_back(median > 0 ? r / median : 1.0);
  }
  result.band = SampleBand(relative);
  return result;
}

}  // namespace mp
