// YamlCursor: key paths and "expected X, found Y" for every read. Numbers
// are parsed with yaml-cpp's own conversions, which reject trailing text
// ("12abc") and fractions where an integer is expected.
#include "common/yaml_cursor.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "common/yaml_document.h"

namespace mp {

YamlCursor::YamlCursor(YAML::Node node, std::string source, std::string path)
    : node_(std::move(node)), source_(std::move(source)), path_(std::move(path)) {}

void YamlCursor::Fail(const std::string& message) const {
  throw InputError(Concat(source_, ": ", path_.empty() ? "top level" : path_, ": ", message));
}

std::string YamlCursor::Found() const {
  if (!node_ || node_.IsNull()) return "nothing";
  if (node_.IsMap()) return "a map";
  if (node_.IsSequence()) return "a list";
  return "'" + Printable(node_.Scalar()) + "'";
}

void YamlCursor::ExpectMap(const std::vector<std::string>& required, const std::vector<std::string>& optional) const {
  if (!node_.IsMap()) Fail("expected a map, found " + Found());
  std::vector<std::string> known = required;
  known.insert(known.end(), optional.begin(), optional.end());
  std::vector<std::string> seen;
  for (const auto& entry : node_) {
    const std::string key = entry.first.IsScalar() ? Printable(entry.first.Scalar()) : "?";
    const YamlCursor child(entry.second, source_, path_.empty() ? key : path_ + "." + key);
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      child.Fail("unknown key (expected one of " + JoinNames(known) + ")");
    }
    // yaml-cpp keeps the first of two equal keys: a later edit would be lost.
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) child.Fail("duplicate key");
    seen.push_back(key);
  }
  for (const std::string& key : required) {
    if (!node_[key]) Fail("missing key '" + key + "'");
  }
}

int YamlCursor::ExpectList(int size) const {
  if (!node_.IsSequence()) Fail("expected a list, found " + Found());
  const int n = static_cast<int>(node_.size());
  if (size >= 0 && n != size) Fail(Concat("expected ", size, " entries, found ", n));
  return n;
}

bool YamlCursor::Has(const std::string& key) const { return node_.IsMap() && node_[key]; }

std::vector<std::string> YamlCursor::Keys() const {
  if (!node_.IsMap()) Fail("expected a map, found " + Found());
  std::vector<std::string> keys;
  for (const auto& entry : node_) {
    const std::string key = entry.first.IsScalar() ? Printable(entry.first.Scalar()) : "?";
    if (std::find(keys.begin(), keys.end(), key) != keys.end()) {
      YamlCursor(entry.second, source_, path_.empty() ? key : path_ + "." + key).Fail("duplicate key");
    }
    keys.push_back(key);
  }
  return keys;
}

YamlCursor YamlCursor::operator[](const std::string& key) const {
  if (!node_.IsMap()) Fail("expected a map, found " + Found());
  const YAML::Node child = node_[key];
  if (!child) Fail("missing key '" + key + "'");
  return YamlCursor(child, source_, path_.empty() ? key : path_ + "." + key);
}

YamlCursor YamlCursor::operator[](int index) const {
  return YamlCursor(node_[static_cast<size_t>(index)], source_, Concat(path_, "[", index, "]"));
}

template <typename T>
T YamlCursor::Scalar(const char* expected) const {
  if (!node_.IsScalar()) Fail(Concat("expected ", expected, ", found ", Found()));
  try {
    return node_.as<T>();
  } catch (const YAML::Exception&) {
    Fail(Concat("expected ", expected, ", found ", Found()));
  }
}

int64_t YamlCursor::Int() const { return Scalar<int64_t>("an integer"); }

int YamlCursor::IntIn(int64_t low, int64_t high) const {
  const int64_t value = Int();
  if (value < low || value > high) Fail(Concat(value, " is out of range (expected ", low, " to ", high, ")"));
  return static_cast<int>(value);
}

double YamlCursor::Number() const { return Scalar<double>("a number"); }

double YamlCursor::NumberIn(double low, double high, const char* what, bool open_low) const {
  const double v = Number();
  if (!std::isfinite(v) || v < low || (open_low && v == low) || v > high) {
    Fail(Concat("expected ", what, " ", open_low ? "> " : ">= ", low,
                std::isinf(high) ? std::string() : Concat(" and <= ", high), ", found ", v));
  }
  return v;
}

bool YamlCursor::Bool() const { return Scalar<bool>("true or false"); }

std::string YamlCursor::String() const {
  if (!node_.IsScalar()) Fail("expected a string, found " + Found());
  return node_.Scalar();
}

std::vector<int64_t> YamlCursor::IntList() const {
  std::vector<int64_t> out;
  const int n = ExpectList();
  for (int i = 0; i < n; ++i) out.push_back((*this)[i].Int());
  return out;
}

std::vector<double> YamlCursor::NumberList() const {
  std::vector<double> out;
  const int n = ExpectList();
  for (int i = 0; i < n; ++i) out.push_back((*this)[i].Number());
  return out;
}

std::vector<std::string> YamlCursor::StringList() const {
  std::vector<std::string> out;
  const int n = ExpectList();
  for (int i = 0; i < n; ++i) out.push_back((*this)[i].String());
  return out;
}

}  // namespace mp
