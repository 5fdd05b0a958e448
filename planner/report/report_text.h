// The terminal report of a plan: what mpplan prints after planning.
#pragma once

#include <string>

#include "planner/plan/plan.h"
#include "planner/report/report_tables.h"

namespace mp {

// The headline, a table of the stages, the summary (predicted step,
// speedup, bubble, K, M, schedule, partitioner, why this plan, the profile)
// and every plan warning on a line of its own starting "warning: ". With
// `explain`, also the search's alternatives (the chosen one marked "*"),
// the comparisons with baselines and the tensors crossing each boundary.
// Columns are aligned to their widest cell; a 4-stage plan fits in 120
// columns. Ends with a newline.
std::string FormatPlanReport(const Plan& plan, bool explain);

// A table as aligned text: the header, a rule of dashes, then the rows;
// columns two spaces apart, each line prefixed by `indent`, no trailing
// spaces. Empty when the table has no rows.
std::string FormatTextTable(const ReportTable& table, const std::string& indent = "");

}  // namespace mp
