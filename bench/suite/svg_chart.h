// Plain SVG charts for the benchmark results: a line chart (the split-size
// curve) and a grouped bar chart. No plotting library; a browser, an image
// viewer or GitHub renders them.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace mp::bench {

struct Series {
  std::string name, color;
  std::vector<std::pair<double, double>> points;  // (x, y), in x order
  bool dashed = false;
};

// A horizontal line across the plot: a figure that does not depend on x.
struct Level {
  std::string name, color;
  double y = 0;
};

// One labelled point drawn on top, e.g. the plan mpplan chose.
struct Mark {
  std::string name, color;
  double x = 0, y = 0;
};

struct LineChart {
  std::string title, x_label, y_label;
  bool log_x = false;
  std::vector<Series> series;
  std::vector<Level> levels;
  std::vector<Mark> marks;
};

// Bars of `values[g][s]` for series s within group g.
struct BarChart {
  std::string title, y_label;
  std::vector<std::string> groups, series;
  std::vector<std::vector<double>> values;  // [group][series]; 0: none measured, no bar
};

std::string RenderSvg(const LineChart& chart);
std::string RenderSvg(const BarChart& chart);

}  // namespace mp::bench
