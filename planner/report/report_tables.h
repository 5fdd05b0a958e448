// What a plan report says, as rows of strings: the stage table, the summary
// (step time, speedup, bubble, K, M, schedule, why this plan won, the
// profile), the search's alternatives, the --explain comparisons and the
// tensors crossing each boundary. The terminal and Markdown reports both
// render these, so they cannot drift apart; they differ only in layout.
#pragma once

#include <string>
#include <vector>

#include "planner/plan/plan.h"

namespace mp {

enum class Align { kLeft, kRight };

// A table of cells; every row has header.size() cells, align one per column.
struct ReportTable {
  std::vector<std::string> header;
  std::vector<Align> align;
  std::vector<std::vector<std::string>> rows;
};

struct SummaryLine {
  std::string label;  // "predicted step", "why", ...
  std::string text;
};

// "models/resnet50.pt: training, batch 32".
std::string PlanHeadline(const Plan& plan);

// "H100-SXM #0" (the device's name, or type:index when unnamed, and its id);
// "device 7?" when stage.device is not an index into plan.devices.
std::string DeviceLabel(const Plan& plan, const PlanStage& stage);

// "conv1..layer1.2" (first..last of stage.layers), one name when the stage
// has one layer, "-" when it has none.
std::string LayerRange(const PlanStage& stage);

// One row per stage: id, device, layers, params, activations sent per
// micro-batch, forward ms, backward ms (training only), busy %, peak memory
// (with the device's limit when it has one).
ReportTable StageTable(const Plan& plan);

// Where a device runs several stages (interleaved-1f1b, zbv): one row per device
// with its stages and its simulated peak memory (against its limit), since
// a stage's own peak then says little about the device. No rows otherwise.
ReportTable DeviceTable(const Plan& plan);

// The predicted step and throughput, the one-device step and speedup, the
// bubble, K, M and micro-batch size, schedule, partitioner, why the search
// chose this plan (and its runner-up), and where the profile came from.
// Lines without data (no one-device time, no profile) are left out.
std::vector<SummaryLine> PlanSummary(const Plan& plan);

// The alternative the plan is (same K, M and schedule, simulated), or null
// when the search did not record it.
const PlanCandidate* ChosenAlternative(const Plan& plan);

// Every alternative, sorted by K, M, schedule: "*" on the chosen one, step
// ms and its ratio to the chosen step, bubble, peak memory; a lower bound
// that was never simulated is noted "(bound)", an infeasible one gives why.
ReportTable AlternativesTable(const Plan& plan);

// Every comparison (baselines, a user split) in plan order: method, split,
// K, M, size, schedule, step ms and its ratio to the chosen plan's step,
// bottleneck, bubble, or why it is infeasible. Columns empty in every row
// (split, when no row has one) are left out.
ReportTable ComparisonsTable(const Plan& plan);

// One row per tensor a stage sends per micro-batch: from, to, value, dtype,
// shape, bytes, and (training) whether its gradient comes back.
ReportTable BoundaryTable(const Plan& plan);

}  // namespace mp
