// Strict reading of a YAML document a user may have edited: every node is
// reached through a cursor that knows its key path (`stages[1].nodes[0]`),
// so each problem becomes one InputError line "SOURCE: PATH: what is wrong".
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace mp {

class YamlCursor {
 public:
  YamlCursor(YAML::Node node, std::string source, std::string path = "");

  // Requires a map whose keys are all in `required` or `optional`, and that
  // has every key in `required`.
  void ExpectMap(const std::vector<std::string>& required, const std::vector<std::string>& optional = {}) const;
  // Requires a sequence (of `size` entries when size >= 0) and returns its length.
  int ExpectList(int size = -1) const;

  bool Has(const std::string& key) const;
  // Requires a map without duplicate keys and returns its keys in order.
  std::vector<std::string> Keys() const;
  YamlCursor operator[](const std::string& key) const;  // the key must exist
  YamlCursor operator[](int index) const;

  int64_t Int() const;
  int IntIn(int64_t low, int64_t high) const;  // low <= value <= high
  double Number() const;
  // A finite number >= low (> low when `open_low`) and <= high; else Fail
  // "expected WHAT >= LOW [and <= HIGH], found V". high may be kNoLimit.
  static constexpr double kNoLimit = std::numeric_limits<double>::infinity();
  double NumberIn(double low, double high, const char* what = "a number", bool open_low = false) const;
  bool Bool() const;
  std::string String() const;
  std::vector<int64_t> IntList() const;
  std::vector<double> NumberList() const;
  std::vector<std::string> StringList() const;

  const std::string& Path() const { return path_; }
  [[noreturn]] void Fail(const std::string& message) const;

 private:
  std::string Found() const;  // how the node looks, for "expected X, found Y"
  template <typename T>
  T Scalar(const char* expected) const;  // yaml-cpp's conversion, or Fail

  YAML::Node node_;
  std::string source_;
  std::string path_;
};

}  // namespace mp
