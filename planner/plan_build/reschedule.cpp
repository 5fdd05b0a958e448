// Reschedule: new programs and placement, then the predictions again.
#include "planner/plan_build/reschedule.h"

#include <algorithm>

#include "common/error.h"
#include "planner/plan_build/plan_build.h"

namespace mp {

void Reschedule(Plan& plan, ScheduleKind kind, int devices) {
  const int S = int(plan.stages.size());
  if (!plan.training) throw InputError(Concat(ScheduleName(kind), " is a training schedule; this plan is inference"));
  if (plan.replicas > 1) throw InputError(Concat(ScheduleName(kind), " with replicas is not planned yet"));
  if (devices < 1 || S % devices != 0) {
    throw InputError(Concat(ScheduleName(kind), ": ", S, " stages do not fold evenly onto ", devices, " devices"));
  }
  const int chunks = S / devices;
  if (std::string why = ScheduleRuledOut(kind, devices, plan.microbatches, chunks); !why.empty()) {
    throw InputError(Concat("--schedule ", ScheduleName(kind), ": ", why));
  }
  const Schedule schedule = BuildSchedule(kind, devices, plan.microbatches, chunks);
  plan.schedule = kind;
  plan.programs.assign(devices, PlanProgram{});
  for (int d = 0; d < devices; ++d) {
    plan.programs[d].device = plan.stages[d].device;
    plan.programs[d].actions = schedule.actions[d];
  }
  bool estimated = false;
  for (PlanStage& stage : plan.stages) {
    stage.program = schedule.DeviceOf(stage.id);
    stage.device = plan.programs[stage.program].device;
    if (SplitsBackward(kind) && stage.input_backward_ms == 0 && stage.weight_backward_ms == 0) {
      // A stage that receives nothing needing a gradient (the first) has no
      // input gradients to compute: its W is its whole backward.
      const bool inputs_need_grad = std::any_of(stage.receives.begin(), stage.receives.end(),
                                                [](const PlanTensor& t) { return t.gradient; });
      stage.input_backward_ms = inputs_need_grad ? stage.backward_ms / 2 : 0;
      stage.weight_backward_ms = stage.backward_ms - stage.input_backward_ms;
      estimated = true;
    }
  }
  if (estimated) {
    plan.warnings.push_back("I and W are each estimated as half of a stage's backward (the first stage's W as all "
                            "of it): the profile does not measure the split yet");
  }
  const SimResult sim = SimulatePlan(plan);
  const double scale = plan.predicted.step_ms > 0 ? sim.step_ms / plan.predicted.step_ms : 1;
  plan.predicted.step_ms = sim.step_ms;
  plan.predicted.step_low_ms *= scale;
  plan.predicted.step_high_ms *= scale;
  plan.predicted.bubble_fraction = sim.bubble_fraction;
  plan.predicted.samples_per_s = sim.step_ms > 0 ? double(plan.batch) * 1000.0 / sim.step_ms : 0;
  plan.predicted.speedup_vs_one_device =
      sim.step_ms > 0 && plan.predicted.one_device_step_ms > 0 ? plan.predicted.one_device_step_ms / sim.step_ms : 0;
  for (PlanStage& stage : plan.stages) {
    stage.busy_fraction = sim.step_ms > 0 ? sim.busy_ms[stage.id] / sim.step_ms : 0;
    stage.peak_memory_bytes = sim.peak_memory_bytes[stage.id];
  }
  // The 1F1B plan's comparison with one device no longer holds.
  auto& w = plan.warnings;
  w.erase(std::remove_if(w.begin(), w.end(), [](const std::string& t) { return t.rfind("pipelining over ", 0) == 0; }),
          w.end());
  if (std::string slower = SlowerThanOneDeviceWarning(plan); !slower.empty()) w.push_back(slower);
}

}  // namespace mp
