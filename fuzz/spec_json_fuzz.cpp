// Fuzzes the JSON input spec a bundled model carries (ParseSpecJson), and
// then SpecBatch and WithBatch on what it accepts, as model loading does.
// A bad spec must end in mp::InputError; a crash, a sanitizer report (a
// huge number cast to int, say) or any other exception is a bug.
#include <cstdint>
#include <string>
#include <vector>

#include "common/error.h"
#include "planner/graph/input_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const std::vector<mp::TensorSpec> specs =
        mp::ParseSpecJson(std::string(reinterpret_cast<const char*>(data), size), "fuzz.json");
    for (const mp::TensorSpec& spec : specs) mp::FormatTensorSpec(spec);
    mp::WithBatch(specs, mp::SpecBatch(specs));
  } catch (const mp::InputError&) {
  }
  return 0;
}
