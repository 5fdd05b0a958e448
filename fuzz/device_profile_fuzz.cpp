// Fuzzes the device-profile reader (ParseDeviceProfile): any bytes as a
// --device-profile file. A bad one must end in mp::InputError; a crash, a
// leak, a sanitizer report or any other exception is a bug.
#include <cstdint>
#include <string>

#include "common/error.h"
#include "planner/profile/device_profile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    mp::ParseDeviceProfile(std::string(reinterpret_cast<const char*>(data), size), "fuzz.yaml");
  } catch (const mp::InputError&) {
  }
  return 0;
}
