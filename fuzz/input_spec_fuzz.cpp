// Fuzzes the `--input dtype[d0,d1,...]` parser (ParseTensorSpec) with any
// text. A bad spec must end in mp::InputError; a crash, a sanitizer report
// or any other exception (std::out_of_range from a number, say) is a bug.
// A spec that parses has a known dtype and positive dimensions, and
// FormatTensorSpec, its inverse, gives text that parses to the same spec.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/error.h"
#include "planner/graph/input_spec.h"

namespace {

[[noreturn]] void Bug(const std::string& what, const std::string& text) {
  std::fprintf(stderr, "input_spec_fuzz: '%s': %s\n", text.c_str(), what.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  mp::TensorSpec spec;
  try {
    spec = mp::ParseTensorSpec(text);
  } catch (const mp::InputError&) {
    return 0;
  }
  if (mp::DtypeBytes(spec.dtype) == 0) Bug("unknown dtype '" + spec.dtype + "' accepted", text);
  for (int64_t d : spec.shape) {
    if (d <= 0) Bug("dimension " + std::to_string(d) + " accepted", text);
  }
  const std::string formatted = mp::FormatTensorSpec(spec);
  mp::TensorSpec again;
  try {
    again = mp::ParseTensorSpec(formatted);
  } catch (const mp::InputError& e) {
    Bug("'" + formatted + "' does not parse back: " + e.what(), text);
  }
  if (again.dtype != spec.dtype || again.shape != spec.shape) Bug("'" + formatted + "' parses back different", text);
  return 0;
}
