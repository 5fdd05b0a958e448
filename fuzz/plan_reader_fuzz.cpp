// Fuzzes the plan reader (ParsePlan): any bytes as a plan file, the way
// mpexec reads one a user may have edited. A bad plan must end in
// mp::InputError or mp::PlanError; a crash, a leak, a sanitizer report, an
// InternalError or any other exception is a bug. A plan that reads must
// also write and read back to the same text (plan_writer.h's promise).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "common/error.h"
#include "planner/plan/plan_reader.h"
#include "planner/plan/plan_writer.h"

namespace {

[[noreturn]] void Bug(const std::string& what, const std::string& text) {
  std::fprintf(stderr, "plan_reader_fuzz: %s\n--- written plan ---\n%s\n", what.c_str(), text.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mp::Plan plan;
  try {
    plan = mp::ParsePlan(std::string(reinterpret_cast<const char*>(data), size), "fuzz.plan.yaml");
  } catch (const mp::InputError&) {
    return 0;
  } catch (const mp::PlanError&) {
    return 0;
  }
  const std::string written = mp::PlanToYaml(plan);
  std::string rewritten;
  try {
    rewritten = mp::PlanToYaml(mp::ParsePlan(written, "written.plan.yaml"));
  } catch (const std::exception& e) {
    Bug(std::string("the written plan does not read back: ") + e.what(), written);
  }
  if (rewritten != written) Bug("the plan reads back different:\n" + rewritten, written);
  return 0;
}
