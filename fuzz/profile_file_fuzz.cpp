// Fuzzes the profile reader (ProfileFromYaml): any bytes as a profile file,
// the way mpplan --profile-in reads one a user may have edited. A bad
// profile must end in mp::InputError; a crash, a leak, a sanitizer report
// or any other exception is a bug. A profile that reads must also write and
// read back to the same text.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "common/error.h"
#include "planner/profile/profile_file.h"

namespace {

[[noreturn]] void Bug(const std::string& what, const std::string& text) {
  std::fprintf(stderr, "profile_file_fuzz: %s\n--- written profile ---\n%s\n", what.c_str(), text.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mp::Profile profile;
  try {
    profile = mp::ProfileFromYaml(std::string(reinterpret_cast<const char*>(data), size), "fuzz.profile.yaml");
  } catch (const mp::InputError&) {
    return 0;
  }
  const std::string written = mp::ProfileToYaml(profile);
  std::string rewritten;
  try {
    rewritten = mp::ProfileToYaml(mp::ProfileFromYaml(written, "written.profile.yaml"));
  } catch (const std::exception& e) {
    Bug(std::string("the written profile does not read back: ") + e.what(), written);
  }
  if (rewritten != written) Bug("the profile reads back different:\n" + rewritten, written);
  return 0;
}
