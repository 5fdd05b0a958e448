// FormatPlanMarkdown: the rows of report_tables.h as GitHub-flavoured
// Markdown. Unlike the terminal report it always lists the alternatives and
// comparisons: a Markdown report is read later, when the question "why not
// 8 stages?" comes up and the planner is no longer running.
#include "planner/report/report_markdown.h"

#include <sstream>

#include "planner/report/report_format.h"

namespace mp {
namespace {

std::string Cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '|': out += "\\|"; break;
      case '*': out += "\\*"; break;
      case '`': out += "\\`"; break;
      case '\\': out += "\\\\"; break;
      case '<': out += "&lt;"; break;
      case '\n': out += ' '; break;
      default: out += c;
    }
  }
  return out;
}

std::string Row(const std::vector<std::string>& cells) {
  std::string out = "|";
  for (const std::string& c : cells) out += " " + Cell(c) + " |";
  return out + "\n";
}

void Section(std::ostringstream& out, const std::string& title, const std::string& note, const ReportTable& table,
             const std::string& if_empty) {
  out << "\n## " << title << "\n\n";
  if (table.rows.empty()) {
    out << "_" << if_empty << "_\n";
    return;
  }
  if (!note.empty()) out << note << "\n\n";
  out << FormatMarkdownTable(table);
}

}  // namespace

std::string FormatMarkdownTable(const ReportTable& table) {
  if (table.rows.empty()) return "";
  std::string out = Row(table.header) + "|";
  for (Align a : table.align) out += a == Align::kRight ? " ---: |" : " --- |";
  out += "\n";
  for (const auto& row : table.rows) out += Row(row);
  return out;
}

std::string FormatPlanMarkdown(const Plan& plan, const std::string& svg_file, bool explain) {
  std::ostringstream out;
  out << "# Pipeline plan for " << Cell(PlanHeadline(plan)) << "\n\n";
  out << Plural(int64_t(plan.stages.size()), "stage") << " x "
      << Plural(plan.microbatches, "micro-batch", "micro-batches") << ", " << ScheduleName(plan.schedule)
      << " schedule, predicted step " << FormatMs(plan.predicted.step_ms) << " ms.\n";
  if (!svg_file.empty()) out << "\n![predicted step](" << svg_file << ")\n";

  out << "\n## Stages\n\n" << FormatMarkdownTable(StageTable(plan));
  if (const ReportTable devices = DeviceTable(plan); !devices.rows.empty()) {
    out << "\n## Devices\n\n" << FormatMarkdownTable(devices);
  }

  out << "\n## Summary\n\n| | |\n| --- | --- |\n";
  for (const SummaryLine& line : PlanSummary(plan))
    out << "| " << Cell(line.label) << " | " << Cell(line.text) << " |\n";

  if (!plan.warnings.empty()) {
    out << "\n## Warnings\n\n";
    for (const std::string& warning : plan.warnings) out << "- warning: " << Cell(warning) << "\n";
  }

  Section(out, "Alternatives searched", "\\* marks the chosen plan; \"vs chosen\" is step time / the chosen step time.",
          AlternativesTable(plan), "none recorded");
  Section(out, "Comparisons", "Baselines and user splits next to the chosen plan; \"vs chosen\" as above.",
          ComparisonsTable(plan), "none (plan with --explain to compare with the baselines)");
  if (explain) {
    Section(out, "Tensors crossing stage boundaries", "Per micro-batch.", BoundaryTable(plan), "none");
  }
  return out.str();
}

}  // namespace mp
