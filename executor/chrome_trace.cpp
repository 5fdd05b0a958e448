// ChromeTrace with nlohmann::json: metadata events name the processes and
// threads, "X" events carry the actions.
#include "executor/chrome_trace.h"

#include <nlohmann/json.hpp>

namespace mp {
namespace {

void Name(nlohmann::json& events, const char* what, int pid, int tid, const std::string& name) {
  events.push_back({{"ph", "M"}, {"name", what}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}});
}

// One track per device: the program that runs the action's stage.
void Add(nlohmann::json& events, int pid, const Plan& plan, const TimedAction& timed) {
  const Action& action = timed.action;
  const double start_ms = timed.start_ms, end_ms = timed.end_ms;
  const char* category = !IsCompute(action.kind)                    ? "transfer"
                         : action.kind == ActionKind::kBackwardWeight ? "weight"
                                                                      : "compute";
  events.push_back({{"ph", "X"},
                    {"pid", pid},
                    {"tid", plan.stages.at(action.stage).program},
                    {"name", FormatAction(action)},
                    {"cat", category},
                    {"ts", start_ms * 1000},
                    {"dur", (end_ms - start_ms) * 1000},
                    {"args", {{"microbatch", action.microbatch}}}});
}

}  // namespace

std::string ChromeTrace(const Plan& plan, const PipelineRun& run) {
  nlohmann::json events = nlohmann::json::array();
  Name(events, "process_name", 1, 0, "measured");
  Name(events, "process_name", 2, 0, "predicted");
  for (size_t p = 0; p < plan.programs.size(); ++p) {
    const std::string stages = ProgramStages(plan, int(p));
    const std::string name = plan.programs.size() == plan.stages.size()
                                 ? "stage " + stages
                                 : "device " + std::to_string(plan.programs[p].device) + " (stages " + stages + ")";
    for (int pid : {1, 2}) Name(events, "thread_name", pid, int(p), name);
  }
  for (const auto& measured : run.events) {
    for (const TimedAction& t : measured) Add(events, 1, plan, t);
  }
  for (const auto& predicted : SimulatePlan(plan).timeline) {
    for (const TimedAction& t : predicted) Add(events, 2, plan, t);
  }
  return nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump();
}

}  // namespace mp
