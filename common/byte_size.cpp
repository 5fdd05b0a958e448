// ParseByteSize: a decimal number and an optional unit, nothing else;
// FormatBytes: at most two decimals, trailing zeros dropped.
#include "common/byte_size.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "common/error.h"

namespace mp {

int64_t ParseByteSize(const std::string& text, const std::string& flag) {
  const auto bad = [&]() {
    return InputError(Concat(flag, ": '", text, "' is not a size (expected e.g. 40GiB or 512MiB)"));
  };
  static const std::map<std::string, double> kUnits = {
      {"", 1},          {"b", 1},           {"k", 1024.0},      {"kib", 1024.0},    {"kb", 1e3},
      {"m", 1 << 20},   {"mib", 1 << 20},   {"mb", 1e6},        {"g", 1 << 30},     {"gib", 1 << 30},
      {"gb", 1e9},      {"t", 1099511627776.0}, {"tib", 1099511627776.0}, {"tb", 1e12}};
  const char* begin = text.c_str();
  char* end = nullptr;
  const double number = std::strtod(begin, &end);
  if (end == begin || !std::isfinite(number) || number <= 0) throw bad();
  std::string unit(end);
  unit.erase(std::remove(unit.begin(), unit.end(), ' '), unit.end());
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return std::tolower(c); });
  const auto it = kUnits.find(unit);
  if (it == kUnits.end()) throw bad();
  const double bytes = number * it->second;
  if (bytes < 1 || bytes > 9.2e18) throw bad();
  return static_cast<int64_t>(std::llround(bytes));
}

std::string FormatBytes(int64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int unit = 0;
  while (v >= 1024 && unit < 4) {
    v /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f", v);
  std::string out = text;
  while (out.back() == '0') out.pop_back();
  if (out.back() == '.') out.pop_back();
  return out + " " + kUnits[unit];
}

}  // namespace mp
