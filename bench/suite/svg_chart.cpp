#include "bench/suite/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "common/xml_escape.h"

namespace mp::bench {
namespace {

// The plot spans kLeft to kWidth - kRight; the legend takes the right margin.
constexpr double kWidth = 1000, kHeight = 440, kLeft = 70, kRight = 470, kTop = 40, kBottom = 50;
const char* const kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};
constexpr size_t kColours = sizeof(kPalette) / sizeof(kPalette[0]);

// A "nice" step for about `ticks` ticks over `span`.
double TickStep(double span, int ticks) {
  const double raw = span / ticks, power = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= m * power) return m * power;
  }
  return 10 * power;
}

std::string Number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// The frame, title, axis labels and y ticks from 0 to y_max; returns y_max
// rounded up to a tick.
double Frame(std::ostringstream& svg, const std::string& title, const std::string& x_label, const std::string& y_label,
             double y_max) {
  const double step = TickStep(std::max(y_max, 1e-9), 6);
  y_max = std::ceil(y_max / step) * step;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << kWidth / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" << mp::XmlEscape(title)
      << "</text>\n";
  const double plot_h = kHeight - kTop - kBottom, right = kWidth - kRight;
  for (double y = 0; y <= y_max + step / 2; y += step) {
    const double py = kTop + plot_h * (1 - y / y_max);
    svg << "<line x1=\"" << kLeft << "\" x2=\"" << right << "\" y1=\"" << py << "\" y2=\"" << py
        << "\" stroke=\"#ddd\"/><text x=\"" << kLeft - 6 << "\" y=\"" << py + 4 << "\" text-anchor=\"end\">"
        << Number(y) << "</text>\n";
  }
  svg << "<line x1=\"" << kLeft << "\" x2=\"" << kLeft << "\" y1=\"" << kTop << "\" y2=\"" << kTop + plot_h
      << "\" stroke=\"black\"/><line x1=\"" << kLeft << "\" x2=\"" << right << "\" y1=\"" << kTop + plot_h << "\" y2=\""
      << kTop + plot_h << "\" stroke=\"black\"/>\n"
      << "<text x=\"" << (kLeft + right) / 2 << "\" y=\"" << kHeight - 12 << "\" text-anchor=\"middle\">"
      << mp::XmlEscape(x_label) << "</text>\n"
      << "<text transform=\"translate(16 " << kTop + plot_h / 2 << ") rotate(-90)\" text-anchor=\"middle\">"
      << mp::XmlEscape(y_label) << "</text>\n";
  return y_max;
}

void LegendEntry(std::ostringstream& svg, int row, const std::string& color, const std::string& name, const char* dash,
                 bool dot) {
  const double x = kWidth - kRight + 16, y = kTop + 10 + 20 * row;
  svg << "<line x1=\"" << x << "\" x2=\"" << x + 24 << "\" y1=\"" << y << "\" y2=\"" << y << "\" stroke=\"" << color
      << "\" stroke-width=\"2\" stroke-dasharray=\"" << dash << "\"/>";
  if (dot) svg << "<circle cx=\"" << x + 12 << "\" cy=\"" << y << "\" r=\"4\" fill=\"" << color << "\"/>";
  svg << "<text x=\"" << x + 30 << "\" y=\"" << y + 4 << "\">" << mp::XmlEscape(name) << "</text>\n";
}

}  // namespace

std::string RenderSvg(const LineChart& chart) {
  double x_min = 1e300, x_max = -1e300, y_max = 0;
  for (const auto& s : chart.series) {
    for (const auto& [x, y] : s.points) {
      x_min = std::min(x_min, x), x_max = std::max(x_max, x), y_max = std::max(y_max, y);
    }
  }
  for (const auto& l : chart.levels) y_max = std::max(y_max, l.y);
  for (const auto& m : chart.marks) {
    x_min = std::min(x_min, m.x), x_max = std::max(x_max, m.x), y_max = std::max(y_max, m.y);
  }
  if (x_min > x_max) x_min = 0, x_max = 1;
  const auto fx = [&](double x) { return chart.log_x ? std::log(std::max(x, 1e-12)) : x; };
  const double lo = fx(x_min), hi = fx(x_max) > lo ? fx(x_max) : lo + 1;
  std::ostringstream svg;
  y_max = Frame(svg, chart.title, chart.x_label, chart.y_label, y_max * 1.05);
  const double plot_w = kWidth - kRight - kLeft - 20, plot_h = kHeight - kTop - kBottom;
  const auto px = [&](double x) { return kLeft + 10 + plot_w * (fx(x) - lo) / (hi - lo); };
  const auto py = [&](double y) { return kTop + plot_h * (1 - y / y_max); };
  // x ticks: every x of the first series (the sizes swept).
  if (!chart.series.empty()) {
    for (const auto& [x, y] : chart.series.front().points) {
      svg << "<text x=\"" << px(x) << "\" y=\"" << kTop + plot_h + 16 << "\" text-anchor=\"middle\">" << Number(x)
          << "</text>\n";
    }
  }
  int row = 0;
  for (const auto& l : chart.levels) {
    svg << "<line x1=\"" << kLeft << "\" x2=\"" << kWidth - kRight << "\" y1=\"" << py(l.y) << "\" y2=\"" << py(l.y)
        << "\" stroke=\"" << l.color << "\" stroke-dasharray=\"2 3\"/>\n";
    LegendEntry(svg, row++, l.color, l.name, "2 3", false);
  }
  for (const auto& s : chart.series) {
    svg << "<polyline fill=\"none\" stroke=\"" << s.color << "\" stroke-width=\"2\""
        << (s.dashed ? " stroke-dasharray=\"6 4\"" : "") << " points=\"";
    for (const auto& [x, y] : s.points) svg << px(x) << "," << py(y) << " ";
    svg << "\"/>\n";
    for (const auto& [x, y] : s.points) {
      svg << "<circle cx=\"" << px(x) << "\" cy=\"" << py(y) << "\" r=\"3\" fill=\"" << s.color << "\"/>\n";
    }
    LegendEntry(svg, row++, s.color, s.name, s.dashed ? "6 4" : "none", true);
  }
  for (const auto& m : chart.marks) {
    svg << "<path d=\"M" << px(m.x) << " " << py(m.y) - 9 << " l7 9 l-7 9 l-7 -9 z\" fill=\"" << m.color
        << "\" stroke=\"black\"/>\n";
    const double x = kWidth - kRight + 16, y = kTop + 10 + 20 * row++;
    svg << "<path d=\"M" << x + 12 << " " << y - 7 << " l6 7 l-6 7 l-6 -7 z\" fill=\"" << m.color
        << "\" stroke=\"black\"/><text x=\"" << x + 30 << "\" y=\"" << y + 4 << "\">" << mp::XmlEscape(m.name) << "</text>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

std::string RenderSvg(const BarChart& chart) {
  double y_max = 0;
  for (const auto& g : chart.values) {
    for (double v : g) y_max = std::max(y_max, v);
  }
  std::ostringstream svg;
  y_max = Frame(svg, chart.title, "", chart.y_label, y_max * 1.05);
  const double plot_w = kWidth - kRight - kLeft, plot_h = kHeight - kTop - kBottom;
  const double group_w = plot_w / std::max<size_t>(chart.groups.size(), 1);
  const double bar_w = group_w * 0.8 / std::max<size_t>(chart.series.size(), 1);
  for (size_t g = 0; g < chart.groups.size(); ++g) {
    const double x0 = kLeft + g * group_w + group_w * 0.1;
    for (size_t s = 0; s < chart.series.size() && s < chart.values[g].size(); ++s) {
      if (!(chart.values[g][s] > 0)) continue;  // not measured in this group
      const double h = plot_h * chart.values[g][s] / y_max;
      svg << "<rect x=\"" << x0 + s * bar_w << "\" y=\"" << kTop + plot_h - h << "\" width=\"" << bar_w * 0.9
          << "\" height=\"" << h << "\" fill=\"" << kPalette[s % kColours] << "\"><title>" << mp::XmlEscape(chart.groups[g]) << ", "
          << mp::XmlEscape(chart.series[s]) << ": " << Number(chart.values[g][s]) << "</title></rect>\n";
    }
    svg << "<text x=\"" << x0 + group_w * 0.4 << "\" y=\"" << kTop + plot_h + 16 << "\" text-anchor=\"middle\">"
        << mp::XmlEscape(chart.groups[g]) << "</text>\n";
  }
  for (size_t s = 0; s < chart.series.size(); ++s) {
    const double x = kWidth - kRight + 16, y = kTop + 10 + 20 * s;
    svg << "<rect x=\"" << x << "\" y=\"" << y - 6 << "\" width=\"24\" height=\"12\" fill=\"" << kPalette[s % kColours]
        << "\"/><text x=\"" << x + 30 << "\" y=\"" << y + 4 << "\">" << mp::XmlEscape(chart.series[s]) << "</text>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace mp::bench
