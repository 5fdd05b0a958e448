// The rows behind every plan report. The "why" line replays the search's
// rule (the fastest simulated step, or the simplest of the alternatives
// predicted within the tie window of the fastest: fewer stages, then fewer
// micro-batches, then 1F1B) over plan.alternatives: how many were tried,
// simulated, ruled out by their lower bound or infeasible, and the
// runner-up with its distance from the winner. Ratios are to
// plan.predicted.step_ms.
#include "planner/report/report_tables.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "common/byte_size.h"
#include "common/error.h"
#include "planner/report/report_format.h"

namespace mp {
namespace {

constexpr double kTieFraction = 5e-4;  // below what "+0.0%" can show

std::string RatioToChosen(const Plan& plan, double step_ms) {
  if (plan.predicted.step_ms <= 0) return "-";
  return FormatRatio(step_ms / plan.predicted.step_ms);
}

std::string Shape(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// "2 stages x 10 micro-batches, 1f1b".
std::string Candidate(int stages, int microbatches, ScheduleKind schedule) {
  return Plural(stages, "stage") + " x " + Plural(microbatches, "micro-batch", "micro-batches") + ", " +
         ScheduleName(schedule);
}

// Drops the columns whose cells are empty in every row.
void DropEmptyColumns(ReportTable& table) {
  for (size_t c = table.header.size(); c-- > 0;) {
    const bool empty = std::all_of(table.rows.begin(), table.rows.end(),
                                   [&](const std::vector<std::string>& row) { return row[c].empty(); });
    if (!empty) continue;
    table.header.erase(table.header.begin() + c);
    table.align.erase(table.align.begin() + c);
    for (auto& row : table.rows) row.erase(row.begin() + c);
  }
}

// `beaten`: a simulated alternative is faster than the chosen one (a plan
// made outside the search, or edited).
std::string WhyChosen(const Plan& plan, const PlanCandidate* chosen, bool beaten) {
  const auto& alts = plan.alternatives;
  if (alts.empty()) return "no alternatives recorded";
  int simulated = 0, bound = 0, infeasible = 0;
  for (const PlanCandidate& a : alts) {
    if (!a.feasible) {
      ++infeasible;
    } else if (a.simulated) {
      ++simulated;
    } else {
      ++bound;
    }
  }
  std::string counts = std::to_string(simulated) + " simulated";
  if (bound) counts += ", " + std::to_string(bound) + " ruled out by a lower bound";
  if (infeasible) counts += ", " + std::to_string(infeasible) + " infeasible";
  const std::string tried = Plural(int64_t(alts.size()), "alternative") + " (" + counts + ")";
  if (!chosen) return tried + " tried; this plan is not one of them";
  const auto fresh = std::find_if(alts.begin(), alts.end(), [](const PlanCandidate& a) { return a.fresh; });
  if (chosen->previous && fresh != alts.end()) {
    return Concat("the previous plan's shape, kept while it ties with the fastest; afresh the rule would choose ",
                  Candidate(fresh->stages, fresh->microbatches, fresh->schedule), " at ", FormatMs(fresh->step_ms),
                  " ms (", FormatDelta(fresh->step_ms / chosen->step_ms - 1), "; --previous none), among ", tried);
  }
  if (plan.objective == Objective::kThroughputPerDevice) {
    double best = RankMs(*chosen, plan.objective);
    for (const PlanCandidate& a : alts) {
      if (a.simulated) best = std::min(best, RankMs(a, plan.objective));
    }
    const std::string how = RankMs(*chosen, plan.objective) > best * (1 + 1e-9) ? "within the device tolerance of the best"
                            : chosen->tie                                      ? "simplest of the ties"
                                                                               : "best";
    return how + " in throughput per device (step x devices; --objective throughput-per-device) of " + tried;
  }
  if (beaten) return "not the fastest of " + tried;
  if (alts.size() == 1) return "the only alternative tried";
  // (one simulated among others a lower bound ruled out is the fastest)
  if (simulated == 1 && bound == 0) return "the only feasible one of " + tried;
  if (chosen->tie) {
    const int ties = int(std::count_if(alts.begin(), alts.end(), [](const PlanCandidate& a) { return a.tie; }));
    return "simplest of " + std::to_string(ties) +
           " ties (predicted within the tie window of the fastest, and within the tie tolerance of the best of their "
           "micro-batch size) among " + tried;
  }
  return "fastest of " + tried;
}

// Where the search tried several replica counts (--replicas auto): the
// best plan of the other kind (with replicas where the plan has none, and
// without where it has), and how it compares; else "".
std::string ReplicasText(const Plan& plan, const PlanCandidate& chosen) {
  const PlanCandidate* other = nullptr;
  for (const PlanCandidate& a : plan.alternatives) {
    if (a.simulated && (a.replicas > 1) != (plan.replicas > 1) && (!other || a.step_ms < other->step_ms)) other = &a;
  }
  if (!other) return "";
  const std::string what =
      other->replicas > 1 ? Concat("with replicas, ", other->replicas, " x ") : std::string("without replicas, ");
  return Concat("; the best ", what, other->stages, other->stages == 1 ? " stage" : " stages", " at ",
                FormatMs(other->step_ms), " ms (", FormatDelta(other->step_ms / chosen.step_ms - 1), ")");
}

// How many of the devices planned for the plan uses, and why not more: the
// best plan searched on more devices, and how it compares.
std::string DevicesText(const Plan& plan, const PlanCandidate* chosen) {
  const size_t used = plan.programs.size() * size_t(std::max(1, plan.replicas));
  std::string text = Concat("uses ", used, " of ", plan.devices.size());
  if (chosen) text += ReplicasText(plan, *chosen);
  if (!chosen || used >= plan.devices.size()) return text;
  const PlanCandidate* more = nullptr;
  bool bounded = false;
  for (const PlanCandidate& a : plan.alternatives) {
    if (!a.feasible || Devices(a) <= Devices(*chosen)) continue;
    if (!a.simulated) bounded = true;
    if (a.simulated && (!more || RankMs(a, plan.objective) < RankMs(*more, plan.objective))) more = &a;
  }
  if (!more) return text + (bounded ? "; plans on more are predicted slower (their lower bounds)" : "");
  const double delta = more->step_ms / chosen->step_ms - 1;
  const std::string copies = more->replicas > 1 ? Concat(more->replicas, " replicas of ") : "";
  const std::string best = Concat(copies, more->stages, more->stages == 1 ? " stage" : " stages", " on ",
                                  Devices(*more), " devices at ", FormatMs(more->step_ms), " ms (",
                                  FormatDelta(delta), ")");
  if (plan.objective == Objective::kThroughputPerDevice) {
    const double share = RankMs(*chosen, plan.objective) / RankMs(*more, plan.objective);
    return text + "; the most samples per second per device: the best on more, " + best + ", gives " +
           FormatPercent(share) + " of them per device";
  }
  if (delta >= 0) return text + "; more predict no faster: the best on more, " + best;
  return text + "; the best on more, " + best + ", is within the device tolerance (--device-tolerance) or the tie "
                "window: not worth its devices";
}

// The schedule, and how the best plan of each other schedule searched
// compares: why this schedule.
std::string ScheduleText(const Plan& plan, const PlanCandidate* chosen) {
  std::string text = ScheduleName(plan.schedule);
  if (StagesPerDevice(plan) > 1) text += Concat(", ", StagesPerDevice(plan), " stages per device");
  if (!chosen) return text;
  // Per schedule: its fastest simulated plan, else its lowest bound (every
  // plan of it pruned), else why none was feasible.
  std::map<ScheduleKind, const PlanCandidate*> best, bound;
  std::map<ScheduleKind, std::string> why_not;
  const auto keep = [](std::map<ScheduleKind, const PlanCandidate*>& m, const PlanCandidate& a) {
    if (!m.count(a.schedule) || a.step_ms < m[a.schedule]->step_ms) m[a.schedule] = &a;
  };
  for (const PlanCandidate& a : plan.alternatives) {
    if (a.schedule == plan.schedule) continue;
    if (!a.feasible) {
      why_not.emplace(a.schedule, a.why_not);
    } else {
      keep(a.simulated ? best : bound, a);
    }
  }
  std::vector<std::string> others;
  for (const auto& [kind, a] : best) {
    others.push_back(Concat(ScheduleName(kind), " ", FormatMs(a->step_ms), " ms (",
                            FormatDelta(a->step_ms / chosen->step_ms - 1), ")"));
  }
  for (const auto& [kind, a] : bound) {
    if (best.count(kind)) continue;
    others.push_back(Concat(ScheduleName(kind), " >= ", FormatMs(a->step_ms), " ms (its lower bound, ",
                            FormatDelta(a->step_ms / chosen->step_ms - 1), ")"));
  }
  for (const auto& [kind, why] : why_not) {
    if (!best.count(kind) && !bound.count(kind)) others.push_back(Concat(ScheduleName(kind), ": ", why));
  }
  if (others.empty()) return text + " (the only schedule searched)";
  std::string list;
  for (const std::string& o : others) list += (list.empty() ? "" : "; ") + o;
  return text + "; the best of the others: " + list;
}

// The best simulated alternative other than the chosen one.
const PlanCandidate* RunnerUp(const Plan& plan, const PlanCandidate* chosen) {
  const PlanCandidate* best = nullptr;
  for (const PlanCandidate& a : plan.alternatives) {
    if (&a == chosen || !a.feasible || !a.simulated) continue;
    if (!best || RankMs(a, plan.objective) < RankMs(*best, plan.objective)) best = &a;
  }
  return best;
}

// `microbatch_size`: the plan's, said to be interpolated where the profile
// did not time it.
std::string ProfileText(const PlanProfile& p, int64_t microbatch_size) {
  std::string out = p.source;
  if (!p.device.empty()) out += " on " + p.device;
  if (p.threads > 0) out += ", " + Plural(p.threads, "thread");
  if (const auto& sizes = p.microbatch_sizes; !sizes.empty()) {
    out += ", at micro-batch sizes";
    for (size_t i = 0; i < sizes.size(); ++i) out += (i ? ", " : " ") + std::to_string(sizes[i]);
    if (microbatch_size > 0 && std::find(sizes.begin(), sizes.end(), microbatch_size) == sizes.end())
      out += " (the plan's " + std::to_string(microbatch_size) + " interpolated)";
  }
  if (p.coverage > 0) {
    out += ", coverage " + FormatPercent(p.coverage);
    if (p.backward_coverage > 0) out += " (backward " + FormatPercent(p.backward_coverage) + ")";
  }
  if (!p.calibration.empty()) out += ", calibration: " + p.calibration;
  if (p.shared_slowdown.size() > 1) {
    out += ", CPU workers slow each other by";
    for (size_t k = 1; k < p.shared_slowdown.size(); ++k)
      out += (k > 1 ? ", " : " ") + FormatRatio(p.shared_slowdown[k]) + " at " + std::to_string(k + 1);
    out += " (charged while stages overlap)";
  }
  if (!p.file.empty()) out += ", from " + p.file;
  return out;
}

}  // namespace

std::string PlanHeadline(const Plan& plan) {
  const std::string model = plan.model.path.empty() ? "plan" : plan.model.path;
  return model + ": " + (plan.training ? "training" : "inference") + ", batch " + std::to_string(plan.batch);
}

std::string DeviceLabel(const Plan& plan, const PlanStage& stage) {
  if (stage.device < 0 || stage.device >= int(plan.devices.size())) {
    return "device " + std::to_string(stage.device) + "?";
  }
  const PlanDevice& d = plan.devices[stage.device];
  const std::string name = d.name.empty() ? d.type + ":" + std::to_string(d.index) : d.name;
  return name + " #" + std::to_string(d.id);
}

std::string LayerRange(const PlanStage& stage) {
  if (stage.layers.empty()) return "-";
  if (stage.layers.size() == 1) return stage.layers.front();
  return stage.layers.front() + ".." + stage.layers.back();
}

ReportTable DeviceTable(const Plan& plan) {
  ReportTable t;
  t.header = {"device", "stages", "peak memory"};
  t.align = {Align::kLeft, Align::kLeft, Align::kRight};
  const auto& peaks = plan.predicted.device_peak_memory_bytes;
  if (StagesPerDevice(plan) < 2) return t;
  for (size_t p = 0; p < peaks.size() && p < plan.programs.size(); ++p) {
    const int device = plan.programs[p].device;
    const std::string stages = ProgramStages(plan, int(p));
    std::string peak = FormatBytes(peaks[p]);
    std::string name = std::to_string(device);
    if (device >= 0 && device < int(plan.devices.size())) {
      name += " " + plan.devices[device].name;
      if (plan.devices[device].memory_bytes > 0) peak += " / " + FormatBytes(plan.devices[device].memory_bytes);
    }
    t.rows.push_back({name, stages, peak});
  }
  return t;
}

namespace {

// The largest device peak against its limit, and the headroom kept under it.
std::string MemoryText(const Plan& plan) {
  if (plan.devices.empty() || plan.devices.front().memory_bytes <= 0) return "";
  int64_t peak = 0;  // the simulated device peaks; older plans: the stages'
  for (int64_t p : plan.predicted.device_peak_memory_bytes) peak = std::max(peak, p);
  if (plan.predicted.device_peak_memory_bytes.empty()) {
    for (const PlanStage& s : plan.stages) peak = std::max(peak, s.peak_memory_bytes);
  }
  const PlanDevice& d = plan.devices.front();
  std::string text = "largest device peak " + FormatBytes(peak) + " of " + FormatBytes(d.memory_bytes);
  if (d.memory_headroom > 0) {
    text += " (planned to at most " + FormatPercent(1 - d.memory_headroom) + ": --memory-headroom " +
            FormatPercent(d.memory_headroom) + ")";
  }
  if (plan.training && !plan.optimizer.empty()) {  // which mpexec runs, too
    const int states = OptimizerStateTensors(plan.optimizer);
    text += "; for " + plan.optimizer + " (--optimizer), " +
            (states == 0 ? std::string("no state") : std::to_string(states) + " state tensor(s)") +
            " a trained parameter";
  }
  return text;
}

// Training a model with frozen parameters (fine-tuning: a frozen
// backbone, LoRA's base weights): how much of what the stages hold trains,
// where it is less than 90% (batch norm's running statistics alone are
// far less than a tenth). "" otherwise.
std::string TrainedText(const Plan& plan) {
  if (!plan.training) return "";
  int64_t params = 0, trained = 0;
  for (const PlanStage& s : plan.stages) {
    trained += s.gradient_bytes;
    params += StageParameterBytes(plan, s);
  }
  if (params <= 0 || double(trained) >= 0.9 * double(params)) return "";
  return FormatBytes(trained) + " of the parameters' " + FormatBytes(params) + " (" +
         FormatPercent(double(trained) / double(params)) +
         "); the rest, frozen (requires_grad false) or buffers, holds no gradient or optimizer state and is not "
         "all-reduced";
}

}  // namespace

ReportTable StageTable(const Plan& plan) {
  ReportTable t;
  t.header = {"stage", "device", "layers", "params", "sent/mb", "fwd ms", "bwd ms", "busy", "peak memory"};
  t.align = {Align::kRight, Align::kLeft,  Align::kLeft,  Align::kRight, Align::kRight,
             Align::kRight, Align::kRight, Align::kRight, Align::kRight};
  for (const PlanStage& s : plan.stages) {
    int64_t sent = 0;
    for (const PlanTensor& tensor : s.sends) sent += tensor.bytes;
    std::string peak = FormatBytes(s.peak_memory_bytes);
    if (s.device >= 0 && s.device < int(plan.devices.size()) && plan.devices[s.device].memory_bytes > 0) {
      peak += " / " + FormatBytes(plan.devices[s.device].memory_bytes);
    }
    t.rows.push_back({std::to_string(s.id), DeviceLabel(plan, s), LayerRange(s),
                      FormatCount(s.param_count) + " (" + FormatBytes(s.param_bytes) + ")",
                      sent ? FormatBytes(sent) : "-", FormatMs(s.forward_ms), FormatMs(s.backward_ms),
                      FormatPercent(s.busy_fraction), peak});
  }
  if (plan.replicas > 1 && plan.training) {  // each stage's gradient all-reduce among the replicas
    t.header.insert(t.header.begin() + 7, "allreduce ms");
    t.align.insert(t.align.begin() + 7, Align::kRight);
    for (size_t s = 0; s < t.rows.size(); ++s) {
      t.rows[s].insert(t.rows[s].begin() + 7, FormatMs(plan.stages[s].allreduce_ms));
    }
  }
  if (std::any_of(plan.stages.begin(), plan.stages.end(), [](const PlanStage& s) { return s.recompute; })) {
    t.header.insert(t.header.begin() + 7, "recompute");
    t.align.insert(t.align.begin() + 7, Align::kLeft);
    for (size_t s = 0; s < t.rows.size(); ++s) {
      t.rows[s].insert(t.rows[s].begin() + 7, plan.stages[s].recompute ? "yes" : "-");
    }
  }
  if (!plan.training) {  // no backward column in inference
    t.header.erase(t.header.begin() + 6);
    t.align.erase(t.align.begin() + 6);
    for (auto& row : t.rows) row.erase(row.begin() + 6);
  }
  return t;
}

namespace {

// Which stages recompute, what it costs in time and what it saves in memory; "" where none does.
std::string RecomputeText(const Plan& plan) {
  std::string text;
  for (const PlanStage& s : plan.stages) {
    if (!s.recompute) continue;
    text += Concat(text.empty() ? "" : "; ", "stage ", s.id, " runs its forward again before each backward (+",
                   FormatMs(s.forward_ms), " ms x ", plan.microbatches, ") and holds ", FormatBytes(s.activation_bytes),
                   " per micro-batch in flight instead of ", FormatBytes(s.recomputed_bytes));
  }
  return text;
}

}  // namespace

const PlanCandidate* ChosenAlternative(const Plan& plan) {
  const PlanCandidate* chosen = nullptr;
  for (const PlanCandidate& a : plan.alternatives) {
    if (a.stages != int(plan.stages.size()) || a.chunks != StagesPerDevice(plan) || a.replicas != plan.replicas ||
        a.microbatches != plan.microbatches || a.schedule != plan.schedule || !a.feasible || !a.simulated) {
      continue;
    }
    if (!chosen || a.step_ms < chosen->step_ms) chosen = &a;
  }
  return chosen;
}

std::vector<SummaryLine> PlanSummary(const Plan& plan) {
  const PlanPrediction& p = plan.predicted;
  std::vector<SummaryLine> lines;
  std::string band;
  if (p.step_high_ms > 0) band = " [" + FormatMs(p.step_low_ms) + ", " + FormatMs(p.step_high_ms) + "]";
  lines.push_back({"predicted step", FormatMs(p.step_ms) + " ms" + band + ", " + FormatRate(p.samples_per_s) +
                                         " samples/s (batch " + std::to_string(plan.batch) + ")"});
  if (p.one_device_step_ms > 0) {
    lines.push_back({"one device", FormatMs(p.one_device_step_ms) + " ms (pipeline speedup " +
                                       FormatRatio(p.speedup_vs_one_device) + ")"});
  }
  lines.push_back({"bubble", FormatPercent(p.bubble_fraction) + " of device time idle"});
  lines.push_back({"stages (K)", plan.programs.size() == plan.stages.size()
                                     ? std::to_string(plan.stages.size())
                                     : Concat(plan.stages.size(), " on ", plan.programs.size(), " devices (",
                                              StagesPerDevice(plan), " each)")});
  lines.push_back({"devices", DevicesText(plan, ChosenAlternative(plan))});
  // Links that charge bytes (between GPUs, or CPU workers as processes):
  // what a message between devices was planned to cost.
  const auto costly = std::find_if(plan.links.begin(), plan.links.end(),
                                   [](const PlanLink& l) { return l.bandwidth_bytes_per_s > 0; });
  if (costly != plan.links.end()) {
    lines.push_back({"messages", "between devices, " + FormatMs(costly->latency_ms) + " ms + " +
                                     FormatBytes(int64_t(costly->bandwidth_bytes_per_s)) + "/s each" +
                                     (plan.devices.front().type == "cpu" ? " (processes over Gloo, as probed)" : "")});
  }
  if (plan.replicas > 1) {
    std::string text = std::to_string(plan.replicas) + " copies of the pipeline, " +
                       Plural(ReplicaBatch(plan), "sample") + " each:";
    for (const PlanStage& s : plan.stages) {
      text += (s.id ? "; stage " : " stage ") + std::to_string(s.id) + " on devices";
      for (size_t r = 0; r < s.replica_devices.size(); ++r) text += (r ? ", " : " ") + std::to_string(s.replica_devices[r]);
    }
    lines.push_back({"replicas (R)", text});
    if (plan.training) {
      const PlanLink& l = plan.replica_link;
      lines.push_back({"all-reduce", FormatMs(p.allreduce_ms) + " ms for the slowest stage's gradients after its last "
                                     "backward (ring over " + std::to_string(plan.replicas) + " replicas, " +
                                     (l.bandwidth_bytes_per_s > 0 ? FormatBytes(int64_t(l.bandwidth_bytes_per_s)) + "/s"
                                                                  : "unlimited bandwidth") +
                                     ", " + FormatMs(l.latency_ms) + " ms a hop); in the step above"});
    }
    const double share = plan.profile.replica_wait_share;
    if (share > 0) {  // the simulator's SimResult::replica_wait_ms, from the plan
      const double wait_ms = share * (p.step_ms - plan.profile.step_overhead_ms) / (1 + share);
      lines.push_back({"replica wait", FormatMs(wait_ms) + " ms (" + FormatPercent(share) +
                                           " more) for the latest replica before each all-reduce, as the profile's "
                                           "two ranks waited for each other; in the step above"});
    }
  }
  if (plan.training && p.optimizer_ms > 0) {
    lines.push_back({"optimizer", FormatMs(p.optimizer_ms) + " ms for " + plan.optimizer +
                                      "'s step on the device with the most to step, after its last backward (each "
                                      "device its own parameters); in the step above"});
  }
  std::string m = std::to_string(plan.microbatches) + " x " + Plural(plan.microbatch_size, "sample");
  const int64_t last = ReplicaBatch(plan) - int64_t(plan.microbatches - 1) * plan.microbatch_size;
  if (plan.batch > 0 && last != plan.microbatch_size) m += " (the last of " + std::to_string(last) + ")";
  lines.push_back({"micro-batches (M)", m});
  const PlanCandidate* chosen = ChosenAlternative(plan);
  lines.push_back({"schedule", ScheduleText(plan, chosen)});
  std::string partitioner = plan.partitioner + (plan.split.empty() ? "" : " \"" + plan.split + "\"");
  if (!plan.cut.empty()) {
    const std::string start = plan.cut.substr(0, plan.cut.find('+'));
    const bool moved = plan.cut.find("neighbour") != std::string::npos;
    if (start == "neighbour") {
      partitioner += ", its cut's boundaries moved by a node or more: that simulates faster than the DP's own cut, "
                     "which minimises the slowest stage rather than the step (--explain compares them)";
    } else {
      partitioner += ", with the " + start + " partitioner's cut" +
                     (moved ? " with boundaries moved by a node or more" : "") +
                     ": it simulates faster than the DP's own, which minimises the slowest stage rather than the "
                     "step (--explain compares them)";
    }
  }
  lines.push_back({"partitioner", partitioner});
  if (std::string text = RecomputeText(plan); !text.empty()) lines.push_back({"recompute", text});
  if (std::string text = MemoryText(plan); !text.empty()) lines.push_back({"memory", text});
  if (std::string text = TrainedText(plan); !text.empty()) lines.push_back({"trained", text});

  const PlanCandidate* other = chosen ? RunnerUp(plan, chosen) : nullptr;
  // Under throughput per device, how much more device time a step of the
  // other costs.
  const double delta =
      other && chosen->step_ms > 0 ? RankMs(*other, plan.objective) / RankMs(*chosen, plan.objective) - 1 : 0;
  const bool tied = other && other->tie && chosen->tie;
  lines.push_back({"why", WhyChosen(plan, chosen, delta <= -kTieFraction && !tied)});
  if (other) {
    // Its copies, where they are not the plan's (or under throughput per
    // device, where they make its device count): a tie between a pipeline
    // and replicas goes to fewer stages a replica, so to the replicas, which
    // the line must show.
    const std::string copies =
        other->replicas != plan.replicas || (plan.objective == Objective::kThroughputPerDevice && other->replicas > 1)
            ? (other->replicas > 1 ? Concat(" x ", other->replicas, " replicas") : std::string(", no replicas"))
            : "";
    std::string text = Candidate(other->stages, other->microbatches, other->schedule) + copies + " at " +
                       FormatMs(other->step_ms) + " ms " +
                       (plan.objective == Objective::kThroughputPerDevice
                            ? "on " + Plural(Devices(*other), "device") + " (" + FormatDelta(delta) +
                                  " device time a step)"
                            : "(" + FormatDelta(delta) + ")");
    if (tied || std::fabs(delta) < kTieFraction) {
      text += tied ? ", a tie: within the tie window, so" : ";";
      text += " ties go to fewer devices, then fewer stages a replica, then fewer recomputing, "
              "then equal micro-batches, then fewer, then the faster schedule (where equal: 1f1b, gpipe, "
              "interleaved-1f1b, zb-h1, zbv, dualpipev)";
    }
    lines.push_back({delta <= -kTieFraction ? "faster" : "runner-up", text});
  }
  if (!plan.profile.source.empty()) lines.push_back({"profile", ProfileText(plan.profile, plan.microbatch_size)});
  return lines;
}

namespace {

// The alternatives table's note on a simulated alternative.
std::string AlternativeNote(const PlanCandidate& a, bool chosen) {
  if (chosen && a.previous) return a.tie ? "chosen: the previous plan's, a tie" : "chosen: the previous plan's";
  if (chosen) return a.tie ? "chosen: the simplest tie" : "chosen";
  if (a.fresh) return "the choice without the previous plan";
  if (a.tie) return "tie: within the tie window of the fastest";
  if (a.previous) return "the previous plan's: no longer a tie";
  return "";
}

}  // namespace

ReportTable AlternativesTable(const Plan& plan) {
  ReportTable t;
  t.header = {"", "R", "K", "M", "size", "schedule", "step ms", "vs chosen", "bubble", "peak memory", "recompute",
              "note"};
  t.align = {Align::kLeft,  Align::kRight, Align::kRight, Align::kRight, Align::kRight, Align::kLeft,
             Align::kRight, Align::kRight, Align::kRight, Align::kRight, Align::kRight, Align::kLeft};
  const PlanCandidate* chosen = ChosenAlternative(plan);
  std::vector<const PlanCandidate*> sorted;
  for (const PlanCandidate& a : plan.alternatives) sorted.push_back(&a);
  std::stable_sort(sorted.begin(), sorted.end(), [](const PlanCandidate* a, const PlanCandidate* b) {
    return std::make_tuple(a->replicas, a->stages, a->microbatches, int(a->schedule)) <
           std::make_tuple(b->replicas, b->stages, b->microbatches, int(b->schedule));
  });
  // The replicas column only where the search tried several counts.
  const bool replicas = std::any_of(sorted.begin(), sorted.end(), [](const PlanCandidate* a) { return a->replicas > 1; });
  for (const PlanCandidate* a : sorted) {
    const std::string k = a->chunks > 1 ? Concat(a->stages, " on ", a->stages / a->chunks) : std::to_string(a->stages);
    std::vector<std::string> row = {a == chosen ? "*" : "", replicas ? std::to_string(a->replicas) : "", k,
                                    std::to_string(a->microbatches),
                                    std::to_string(a->microbatch_size), ScheduleName(a->schedule)};
    const std::string peak = a->peak_memory_bytes > 0 ? FormatBytes(a->peak_memory_bytes) : "-";
    if (!a->feasible) {
      row.insert(row.end(), {"-", "-", "-", peak, "infeasible: " + a->why_not});
    } else if (!a->simulated) {
      row.insert(row.end(), {FormatMs(a->step_ms), ">= " + RatioToChosen(plan, a->step_ms), "-", peak,
                             "(bound) not simulated: its lower bound is beyond the tie window"});
    } else {
      row.insert(row.end(), {FormatMs(a->step_ms), RatioToChosen(plan, a->step_ms), FormatPercent(a->bubble_fraction),
                             peak, AlternativeNote(*a, a == chosen)});
    }
    row.insert(row.end() - 1, a->recomputing > 0 ? std::to_string(a->recomputing) : "");
    t.rows.push_back(std::move(row));
  }
  DropEmptyColumns(t);
  return t;
}

ReportTable ComparisonsTable(const Plan& plan) {
  ReportTable t;
  t.header = {"",        "method",    "split",         "K",      "M",   "size", "schedule",
              "step ms", "vs chosen", "bottleneck ms", "bubble", "note"};
  t.align = {Align::kLeft, Align::kLeft,  Align::kLeft,  Align::kRight, Align::kRight, Align::kRight,
             Align::kLeft, Align::kRight, Align::kRight, Align::kRight, Align::kRight, Align::kLeft};
  // A dp plan that kept a baseline's cut is that baseline's row; the dp
  // row is then the DP's own cut. A cut moved from either (neighbour,
  // block+neighbour) is no row: the plan is none of them.
  const std::string& chosen_cut = plan.cut.empty() ? plan.partitioner : plan.cut;
  for (const PlanCandidate& c : plan.comparisons) {
    const bool same = c.method == chosen_cut && c.split == plan.split && c.stages == int(plan.stages.size()) &&
                      c.microbatches == plan.microbatches && c.schedule == plan.schedule && c.feasible;
    std::vector<std::string> row = {same ? "*" : "",
                                    c.method,
                                    c.split,
                                    std::to_string(c.stages),
                                    std::to_string(c.microbatches),
                                    std::to_string(c.microbatch_size),
                                    ScheduleName(c.schedule)};
    if (c.feasible) {
      row.insert(row.end(), {FormatMs(c.step_ms), RatioToChosen(plan, c.step_ms), FormatMs(c.bottleneck_ms),
                             FormatPercent(c.bubble_fraction), same ? "the chosen plan" : ""});
    } else {
      row.insert(row.end(), {"-", "-", "-", "-", "infeasible: " + c.why_not});
    }
    t.rows.push_back(std::move(row));
  }
  DropEmptyColumns(t);
  return t;
}

ReportTable BoundaryTable(const Plan& plan) {
  ReportTable t;
  t.header = {"from", "to", "value", "dtype", "shape", "bytes", "gradient back"};
  t.align = {Align::kRight, Align::kRight, Align::kLeft, Align::kLeft, Align::kLeft, Align::kRight, Align::kLeft};
  for (const PlanStage& s : plan.stages) {
    for (const PlanTensor& tensor : s.sends) {
      t.rows.push_back({std::to_string(s.id), std::to_string(tensor.peer), tensor.value, tensor.dtype,
                        tensor.shape.empty() ? "-" : Shape(tensor.shape), FormatBytes(tensor.bytes),
                        plan.training ? (tensor.gradient ? "yes" : "no") : ""});
    }
  }
  DropEmptyColumns(t);
  return t;
}

}  // namespace mp
