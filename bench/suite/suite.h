// bench_suite: every comparison of docs/BENCHMARKS.md ("Against what users
// would do") in one run. Each section measures its cases side by side, in
// turns, in fresh mpplan / mpexec processes, and returns rows (its CSV and
// its part of results.json) and lines for the summary table printed last.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace mp::bench {

// Where the tools and models are, where results go, and how big to run.
struct Suite {
  std::string mpplan, mpexec;  // the binaries under test
  std::string python, peer;    // Debian's python3 (with torch) and bench/peers/pipe_peer.py
  std::string models;          // the exported zoo (build/models)
  std::string out;             // results folder
  bool smoke = false;          // tiny sizes, one turn: seconds, for CI
};

// One line of the summary table.
struct SummaryLine {
  std::string what, measured, predicted, reading;
};

struct Section {
  explicit Section(std::string stem) : name(std::move(stem)) {}

  std::string name;                               // file stem of its CSV (and plot)
  nlohmann::json rows = nlohmann::json::array();  // flat objects, one per case
  std::vector<SummaryLine> summary;
};

// The sections, in the order the runner runs them.
Section TutorialResNet(const Suite& suite);   // tutorial.cpp: split-size sweep, hand split, mpplan's plan
Section TutorialConvNet(const Suite& suite);  // convnet.cpp: the 4-device CIFAR ConvNet
Section Peers(const Suite& suite);            // peers.cpp: torch.distributed.pipeline.sync.Pipe, eager PyTorch
Section Partitioners(const Suite& suite);     // partitioners.cpp: DP vs block, params, uniform
Section Fidelity(const Suite& suite);         // fidelity.cpp: predicted vs measured at 1 and 2 stages
Section PlannerSpeed(const Suite& suite);     // planner_speed.cpp: zoo and synthetic graphs

}  // namespace mp::bench
