// The Markdown report of a plan: the terminal report's content as Markdown
// tables, for reading later (next to the plan file and its Gantt chart).
#pragma once

#include <string>

#include "planner/plan/plan.h"
#include "planner/report/report_tables.h"

namespace mp {

// A title, the Gantt chart as `![predicted step](svg_file)` (left out when
// svg_file is empty), the stage table, the summary, warnings, and always
// the alternatives and comparisons sections (saying "none" when the plan has
// none). With `explain`, also the tensors crossing each boundary. Cells are
// escaped so '|', '*', '`', a backslash and '<' in names and reasons stay text.
std::string FormatPlanMarkdown(const Plan& plan, const std::string& svg_file, bool explain);

// A GitHub-flavoured Markdown table (header, alignment row, rows); empty
// when the table has no rows.
std::string FormatMarkdownTable(const ReportTable& table);

}  // namespace mp
