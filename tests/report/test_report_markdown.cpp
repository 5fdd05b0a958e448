// Markdown report: the same rows as the terminal report (they come from the
// same tables), the Gantt chart embedded, and the alternatives and
// comparisons always present, with '|' in cells escaped.
#include <doctest/doctest.h>

#include "planner/report/report_markdown.h"
#include "planner/report/report_text.h"
#include "tests/report/report_lines.h"
#include "tests/report/sample_plan.h"

using namespace mp::testing;

namespace {

// Cell separators in a Markdown table row: '|' not escaped by a backslash.
int Pipes(const std::string& row) {
  int n = 0;
  for (size_t i = 0; i < row.size(); ++i) n += row[i] == '|' && (i == 0 || row[i - 1] != '\\');
  return n;
}

// The table rows (lines starting '|') of the section titled `title`.
std::vector<std::string> TableRows(const std::string& md, const std::string& title) {
  std::vector<std::string> rows;
  bool in = false;
  for (const std::string& line : Lines(md)) {
    if (StartsWith(line, "## ")) in = line == "## " + title;
    if (in && StartsWith(line, "|")) rows.push_back(line);
  }
  return rows;
}

}  // namespace

TEST_CASE("the Gantt chart is embedded, and left out without a file") {
  const mp::Plan plan = SamplePlan();
  CHECK(Contains(mp::FormatPlanMarkdown(plan, "plan.gantt.svg", false), "![predicted step](plan.gantt.svg)"));
  CHECK_FALSE(Contains(mp::FormatPlanMarkdown(plan, "", false), "!["));
}

TEST_CASE("stages, alternatives and comparisons are tables with a row each, even without explain") {
  const mp::Plan plan = SamplePlan(4, 8);
  const std::string md = mp::FormatPlanMarkdown(plan, "gantt.svg", false);
  Dump("report_4x8.md", md);
  CHECK(TableRows(md, "Stages").size() == 2 + plan.stages.size());
  CHECK(TableRows(md, "Alternatives searched").size() == 2 + plan.alternatives.size());
  CHECK(TableRows(md, "Comparisons").size() == 2 + plan.comparisons.size());
  CHECK(TableRows(md, "Tensors crossing stage boundaries").empty());
  size_t sends = 0;
  for (const mp::PlanStage& s : plan.stages) sends += s.sends.size();
  CHECK(sends == 5);  // one per boundary and the skip connection twice
  CHECK(TableRows(mp::FormatPlanMarkdown(plan, "", true), "Tensors crossing stage boundaries").size() == 2 + sends);
  for (const char* title : {"Stages", "Summary", "Alternatives searched", "Comparisons"}) {
    const auto rows = TableRows(md, title);
    REQUIRE(!rows.empty());
    for (const std::string& row : rows) {
      CAPTURE(row);
      CHECK(Pipes(row) == Pipes(rows[0]));  // every row has the header's cells
    }
  }
}

TEST_CASE("markdown and text show the same cells") {
  const mp::Plan plan = SamplePlan();
  const std::string md = mp::FormatPlanMarkdown(plan, "", true);
  const std::string text = mp::FormatPlanReport(plan, true);
  for (const mp::ReportTable& table : {mp::StageTable(plan), mp::AlternativesTable(plan)}) {
    for (const auto& row : table.rows) {
      for (const std::string& cell : row) {
        if (cell == "*") continue;  // escaped in Markdown
        CAPTURE(cell);
        CHECK(Contains(md, "| " + cell + " |"));
        CHECK(Contains(text, cell));
      }
    }
  }
  for (const mp::SummaryLine& line : mp::PlanSummary(plan))
    CHECK(Contains(md, "| " + line.label + " | " + line.text + " |"));
}

TEST_CASE("infeasible rows give their reason - '|' and '*' in cells are escaped") {
  const mp::Plan plan = SamplePlan();
  const std::string md = mp::FormatPlanMarkdown(plan, "", false);
  CHECK(Contains(md, "| infeasible: dp: stage 0 needs 90 GiB; device 0 has 80 GiB |"));
  CHECK(Contains(md, "| infeasible: block: stage 1 needs 95 GiB; device 1 has 80 GiB |"));
  CHECK(Contains(md, "| layer1 \\| layer2,layer3 |"));
  CHECK(Contains(md, "| \\* | 3 | 4 |"));  // the chosen alternative
  for (const std::string& warning : plan.warnings) CHECK(Contains(md, "- warning: " + warning + "\n"));
}

TEST_CASE("empty alternatives and comparisons still have their sections") {
  mp::Plan plan = SamplePlan();
  plan.alternatives.clear();
  plan.comparisons.clear();
  const std::string md = mp::FormatPlanMarkdown(plan, "", false);
  CHECK(Contains(md, "## Alternatives searched\n\n_none recorded_"));
  CHECK(Contains(md, "## Comparisons\n\n_none"));
}
