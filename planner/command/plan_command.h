// What `mpplan MODEL --gpus N` does: profile (or read/estimate a profile),
// search the plans, build the chosen one, and write the plan file and the
// reports the user asked for. The main only parses flags and prints.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "planner/graph/op_graph.h"
#include "planner/partition/search.h"
#include "planner/plan/plan.h"
#include "planner/profile/profile_command.h"

namespace mp {

// What plans leave free of each device's memory by default: the memory
// model's error on the zoo (docs/BENCHMARKS.md, "The memory sweep") is
// within a few percent where a plan fills its limit.
constexpr double kDefaultMemoryHeadroom = 0.05;

struct PlanCommandRequest {
  ProfileRequest profile;              // model path, inputs, mode, batch, profile source and files
  int gpus = 1;
  int replicas = 0;                    // data-parallel copies of the pipeline: stages <= gpus / replicas; 0: auto
  int stages = 0;                      // 0: auto (1..gpus)
  bool processes = false;              // --processes: each device a process (CPU: messages over Gloo)
  int microbatches = 0;                // 0: auto
  std::optional<ScheduleKind> schedule;  // unset: auto
  int chunks = 0;                      // interleaved-1f1b: stages per device; 0: 2
  std::string partitioner = "dp";      // dp | uniform | params | block | layers
  std::string split;                   // --split: compared with, or used by partitioner layers
  int64_t memory_bytes = 0;            // per device; 0: the device's own
  double memory_headroom = kDefaultMemoryHeadroom;  // --memory-headroom, as a fraction
  std::string optimizer = "adam";      // --optimizer: sgd | momentum | adam | adamw (OptimizerStateTensors)
  Recompute recompute = Recompute::kAuto;  // --recompute: never | auto | always
  double tie_tolerance = kDefaultTieTolerance;  // --tie-tolerance, as a fraction
  double device_tolerance = kDefaultDeviceTolerance;  // --device-tolerance, as a fraction
  Objective objective = Objective::kStep;  // --objective: step | throughput-per-device
  std::string output;                  // -o; "": MODEL.plan.yaml beside the model
  std::string previous;                // --previous: a plan file, "none", or "": the output where it exists
  std::string report;                  // --report FILE.md (+ FILE.svg beside it)
  std::string dot;                     // --dot FILE.dot
};

struct PlanCommandResult {
  Plan plan;
  OpGraph graph;
  std::string plan_path;
  std::string svg_path;                // written with --report
  double load_ms = 0;                  // load, canonicalise, shapes
  double profile_ms = 0;               // measure, estimate or read the profile
  double partition_ms = 0;             // search + building the plan
  double compare_ms = 0;               // the baselines and --split comparisons
};

// The default plan path: MODEL with its .pt extension replaced by .plan.yaml.
std::string DefaultPlanPath(const std::string& model_path);

// Runs the command. Every output is written atomically, after the plan has
// been read back and checked, and never over the model or an input file.
PlanCommandResult RunPlanCommand(const PlanCommandRequest& request);

// What `mpplan --json` prints: plan, stages, microbatches, replicas,
// allreduce_ms, schedule, predicted_step_ms, bottleneck_ms,
// bubble_fraction, profile {source, device, coverage}, timing {load_ms,
// profile_ms, partition_ms, compare_ms}, stage_list (each stage's id,
// device, nodes, layers, times, peak memory and whether it recomputes),
// comparisons and warnings.
nlohmann::json PlanResultJson(const PlanCommandResult& result);

}  // namespace mp
