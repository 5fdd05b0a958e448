// ChromeTrace with nlohmann::json: metadata events name the processes and
// threads, "X" events carry the actions.
#include "executor/chrome_trace.h"

#include <nlohmann/json.hpp>

namespace mp {
namespace {

void Name(nlohmann::json& events, const char* what, int pid, int tid, const std::string& name) {
  events.push_back({{"ph", "M"}, {"name", what}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}});
}

void Add(nlohmann::json& events, int pid, const TimedAction& timed) {
  const Action& action = timed.action;
  const double start_ms = timed.start_ms, end_ms = timed.end_ms;
  events.push_back({{"ph", "X"},
                    {"pid", pid},
                    {"tid", action.stage},
                    {"name", FormatAction(action)},
                    {"cat", IsCompute(action.kind) ? "compute" : "transfer"},
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
  for (const auto& measured : run.events) {
    for (const TimedAction& t : measured) Add(events, 1, t);
  }
  for (const auto& predicted : SimulatePlan(plan).timeline) {
    for (const TimedAction& t : predicted) Add(events, 2, t);
  }
  return nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump();
}

}  // namespace mp
