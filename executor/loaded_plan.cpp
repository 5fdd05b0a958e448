// LoadPlanForRun: read, resolve the model path against the plan's directory,
// compare the file's sha256 before spending time loading it (not a --model's,
// whose weights are its own), canonicalise in the plan's mode, compare the
// fingerprint, and cut. The executor never
// re-plans: a plan that does not match its model is refused, not repaired.
#include "executor/loaded_plan.h"

#include <filesystem>

#include "common/error.h"
#include "common/sha256.h"
#include "planner/graph/build_op_graph.h"
#include "planner/plan/plan_reader.h"

namespace mp {

LoadedPlan LoadPlanForRun(const std::string& plan_path, const std::string& model) {
  namespace fs = std::filesystem;
  LoadedPlan loaded;
  loaded.plan_path = plan_path;
  loaded.plan = ReadPlan(plan_path);
  const fs::path planned(loaded.plan.model.path);
  loaded.planned_model_path = planned.is_absolute()
                                  ? planned.string()
                                  : (fs::path(plan_path).parent_path() / planned).lexically_normal().string();
  loaded.model_path = model.empty() ? loaded.planned_model_path : model;
  if (!fs::exists(loaded.model_path)) {
    throw InputError(model.empty() ? Concat(plan_path, ": model.path: ", loaded.model_path, ": no such file")
                                   : Concat("--model ", model, ": no such file"));
  }
  CheckModelFile(loaded.model_path);
  const std::string sha = model.empty() ? Sha256File(loaded.model_path) : "";
  if (model.empty() && sha != loaded.plan.model.sha256) {
    throw InputError(Concat(plan_path, ": model.sha256: ", loaded.model_path,
                            " has changed since it was planned (sha256 ", sha.substr(0, 12), "..., the plan has ",
                            loaded.plan.model.sha256.substr(0, 12),
                            "...); plan it again with mpplan, or run the plan on it with --model if only its "
                            "weights changed"));
  }
  loaded.model = LoadModelFile(loaded.model_path);
  CanonicalOptions options;
  options.training = loaded.plan.training;
  options.given.count = static_cast<int>(loaded.plan.inputs.size());
  for (const TensorSpec& input : loaded.plan.inputs) options.given.names.push_back(input.name);
  loaded.canonical = Canonicalize(loaded.model.module, options);
  if (!model.empty() && loaded.canonical.fingerprint != loaded.plan.model.graph_fingerprint) {
    throw InputError(Concat("--model ", model, ": its canonical graph (", loaded.canonical.fingerprint,
                            ") is not the one ", plan_path, " was made for (", loaded.plan.model.graph_fingerprint,
                            "): --model takes the planned model with other weights; plan this one with mpplan"));
  }
  CheckPlanAgainstGraph(loaded.plan, BuildOpGraph(loaded.canonical), plan_path);
  loaded.stages = CutStages(loaded.canonical, StageOfNode(loaded.plan));
  for (const StageGraph& stage : loaded.stages) {
    loaded.runners.push_back(std::make_shared<const GraphRunner>(stage.graph, Concat("stage", stage.index)));
  }
  loaded.output_layout = ProbeOutputs(loaded.canonical, loaded.plan.inputs);
  loaded.layout = BuildStageLayout(loaded.canonical, loaded.stages, loaded.plan.training);
  return loaded;
}

}  // namespace mp
