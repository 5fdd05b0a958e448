// ChromeTrace with nlohmann::json: metadata events name the processes and
// threads, "X" events carry the actions.
#include "executor/chrome_trace.h"

#include <nlohmann/json.hpp>

namespace mp {
namespace {

void Name(nlohmann::json& events, const char* what, int pid, int tid, const std::string& name) {
  events.push_back({{"ph", "M"}, {"name", what}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}});
}

void Add(nlohmann::json& events, int pid, int stage, const Action& action, double start_ms, double end_ms) {
  const bool compute = action.kind == ActionKind::kForward || action.kind == ActionKind::kBackward;
  events.push_back({{"ph", "X"},
                    {"pid", pid},
                    {"tid", stage},
                    {"name", FormatAction(action)},
                    {"cat", compute ? "compute" : "transfer"},
                    {"ts", start_ms * 1000},
                    {"dur", (end_ms - start_ms) * 1000},
                    {"args", {{"microbatch", action.microbatch}}}});
}

}  // namespace

std::string ChromeTrace(const Plan& plan, const PipelineRun& run) {
  nlohmann::json events = nlohmann::json::array();
  Name(events, "process_name", 1, 0, "measured");
  Name(events, "process_name", 2, 0, "predicted");
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    for (int pid : {1, 2}) Name(events, "thread_name", pid, int(s), "stage " + std::to_string(s));
  }
  for (size_t s = 0; s < run.events.size(); ++s) {
    for (const ActionEvent& e : run.events[s]) {
      Add(events, 1, int(s), Action{int(s), e.kind, e.microbatch}, e.start_ms, e.end_ms);
    }
  }
  const SimResult predicted = SimulatePlan(plan);
  for (size_t s = 0; s < predicted.timeline.size(); ++s) {
    for (const TimedAction& t : predicted.timeline[s]) Add(events, 2, int(s), t.action, t.start_ms, t.end_ms);
  }
  return nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump();
}

}  // namespace mp
