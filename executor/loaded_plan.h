// What mpexec runs: a plan read with the shared reader, its model loaded and
// proven to be the one the plan was made for (sha256 and graph fingerprint),
// and the canonical graph cut into the plan's stages.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "executor/microbatches.h"
#include "executor/runtime/stage_layout.h"
#include "planner/graph/canonical_graph.h"
#include "planner/graph/cut.h"
#include "planner/graph/model_file.h"
#include "planner/graph/run_graph.h"
#include "planner/plan/plan.h"

namespace mp {

struct LoadedPlan {
  std::string plan_path;
  std::string model_path;         // what runs: the plan's model resolved against its directory, or --model
  std::string planned_model_path; // the plan's model, resolved (model_path too unless --model)
  Plan plan;
  ModelFile model;
  CanonicalGraph canonical;       // in the plan's mode (train or eval)
  std::vector<StageGraph> stages; // CutStages by the plan's node ranges
  std::vector<std::shared_ptr<const GraphRunner>> runners;  // stages[s].graph compiled once
  OutputLayout output_layout;     // ProbeOutputs: how outputs join, what labels look like
  StageLayout layout;             // where each stage's parameters and boundary values live
};

// Throws InputError naming the key or file: an unreadable or invalid plan, a
// missing model, a model whose sha256 or canonical graph differs from the
// plan's, or a plan that does not fit the graph (CheckPlanAgainstGraph).
// `model`, when given (mpexec --model), runs in place of the plan's: a file
// whose canonical graph is the plan's, its weights its own (a checkpoint
// that --save wrote); its sha256 is not compared, its graph is.
LoadedPlan LoadPlanForRun(const std::string& plan_path, const std::string& model = "");

}  // namespace mp
