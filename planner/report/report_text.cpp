// FormatPlanReport: lays out the report rows of report_tables.h for a
// terminal. Column widths come from the cells (counted in code points, so
// UTF-8 names do not skew them); numbers are right-aligned, names left; the
// last column is not padded, so a long infeasibility reason in a note
// does not widen the rows above it.
#include "planner/report/report_text.h"

#include <algorithm>
#include <sstream>

#include "planner/report/report_format.h"

namespace mp {
namespace {

std::string Pad(const std::string& text, size_t width, Align align) {
  const size_t w = DisplayWidth(text);
  if (w >= width) return text;
  const std::string fill(width - w, ' ');
  return align == Align::kRight ? fill + text : text + fill;
}

std::string TrimRight(std::string text) {
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

void Section(std::ostringstream& out, const std::string& title, const ReportTable& table, const std::string& if_empty) {
  out << "\n" << title << "\n";
  out << (table.rows.empty() ? "  " + if_empty + "\n" : FormatTextTable(table, "  "));
}

}  // namespace

std::string FormatTextTable(const ReportTable& table, const std::string& indent) {
  if (table.rows.empty()) return "";
  std::vector<size_t> width(table.header.size(), 0);
  for (size_t c = 0; c < width.size(); ++c) {
    width[c] = DisplayWidth(table.header[c]);
    for (const auto& row : table.rows) width[c] = std::max(width[c], DisplayWidth(row[c]));
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text = indent;
    for (size_t c = 0; c < cells.size(); ++c) {
      const bool last = c + 1 == cells.size();
      text += (c ? "  " : "") +
              (last && table.align[c] == Align::kLeft ? cells[c] : Pad(cells[c], width[c], table.align[c]));
    }
    return TrimRight(text) + "\n";
  };
  std::vector<std::string> rule;
  for (size_t w : width) rule.push_back(std::string(w, '-'));
  std::string out = line(table.header) + line(rule);
  for (const auto& row : table.rows) out += line(row);
  return out;
}

std::string FormatPlanReport(const Plan& plan, bool explain) {
  std::ostringstream out;
  out << "plan for " << PlanHeadline(plan) << "\n\n";
  out << FormatTextTable(StageTable(plan));
  if (const ReportTable devices = DeviceTable(plan); !devices.rows.empty()) out << "\n" << FormatTextTable(devices);

  const std::vector<SummaryLine> summary = PlanSummary(plan);
  size_t label_width = 0;
  for (const SummaryLine& line : summary) label_width = std::max(label_width, DisplayWidth(line.label));
  out << "\n";
  for (const SummaryLine& line : summary) out << Pad(line.label, label_width + 2, Align::kLeft) << line.text << "\n";

  if (!plan.warnings.empty()) out << "\n";
  for (const std::string& warning : plan.warnings) out << "warning: " << warning << "\n";

  if (explain) {
    Section(out, "alternatives searched (* = chosen; vs chosen = step / chosen step)", AlternativesTable(plan),
            "none recorded");
    Section(out, "comparisons with other partitioners (vs chosen = step / chosen step)", ComparisonsTable(plan),
            "none (the plan was made without comparisons)");
    Section(out, "tensors crossing stage boundaries, per micro-batch", BoundaryTable(plan), "none");
  }
  return out.str();
}

}  // namespace mp
