// SHA-256 (FIPS 180-4) of a file or a string, as lowercase hex: what a plan
// records of its model so the executor can refuse a model that changed.
#pragma once

#include <string>

namespace mp {

// kFastest takes the CPU's SHA instructions where it has them (x86-64 SHA
// extensions), kPortable the plain C++ rounds: the same digest; tests
// compare the two.
enum class Sha256Path { kFastest, kPortable };

std::string Sha256Hex(const std::string& bytes, Sha256Path path = Sha256Path::kFastest);

// Streams the file; throws InputError "PATH: no such file" or "PATH: cannot
// read the file".
std::string Sha256File(const std::string& path);

}  // namespace mp
