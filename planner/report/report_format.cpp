// Number formatting for the plan reports. Times keep about four significant
// digits (a step of 412.3 ms next to a stage of 12.31 ms), which is what the
// simulator's predictions are worth; everything else is fixed-point.
#include "planner/report/report_format.h"

#include <cmath>
#include <cstdio>

namespace mp {
namespace {

std::string Printf(const char* format, double value) {
  char text[48];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

}  // namespace

std::string FormatMs(double ms) {
  const double a = std::fabs(ms);
  if (a == 0) return "0";
  if (a < 1) return Printf("%.3f", ms);
  if (a < 100) return Printf("%.2f", ms);
  if (a < 1000) return Printf("%.1f", ms);
  return Printf("%.0f", ms);
}

std::string FormatRate(double per_s) {
  const double a = std::fabs(per_s);
  if (a < 10) return Printf("%.2f", per_s);
  if (a < 1000) return Printf("%.1f", per_s);
  if (a < 1e4) return Printf("%.0f", per_s);
  return FormatCount(int64_t(std::llround(per_s)));
}

std::string FormatPercent(double fraction) { return Printf("%.1f%%", 100 * fraction); }

std::string FormatCount(int64_t count) {
  const double v = double(count);
  const double a = std::fabs(v);
  if (a < 1e3) return std::to_string(count);
  if (a < 1e6) return Printf("%.1fK", v / 1e3);
  if (a < 1e9) return Printf("%.1fM", v / 1e6);
  return Printf("%.1fB", v / 1e9);
}

std::string FormatRatio(double ratio) { return Printf("%.2fx", ratio); }

std::string FormatDelta(double fraction) { return Printf("%+.1f%%", 100 * fraction); }

std::string Plural(int64_t count, const std::string& singular, const std::string& plural) {
  if (count == 1) return "1 " + singular;
  return std::to_string(count) + " " + (plural.empty() ? singular + "s" : plural);
}

size_t DisplayWidth(const std::string& utf8) {
  size_t width = 0;
  for (unsigned char c : utf8) width += (c & 0xC0) != 0x80;  // skip continuation bytes
  return width;
}

}  // namespace mp
