// Error types shared by every layer. Each tool's main catches mp::Error,
// prints what() on one line and exits non-zero; anything else is a bug.
//
//   InputError    the user gave us something wrong: a file, a flag, a plan key
//   PlanError     the request is well formed but cannot be satisfied
//                 (an invalid cut, a memory limit nothing fits in)
//   InternalError a broken invariant inside mpplan itself
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace mp {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class InputError : public Error {
 public:
  using Error::Error;
};

class PlanError : public Error {
 public:
  using Error::Error;
};

class InternalError : public Error {
 public:
  using Error::Error;
};

// Builds a message from streamable parts: Concat("node ", 3, " of ", n).
template <typename... Parts>
std::string Concat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

// Names for a message: "a, b, c".
inline std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace mp
