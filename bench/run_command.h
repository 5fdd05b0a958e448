// How the benches run the mpplan and mpexec binaries: a shell command whose
// output is kept for the figures and for a look when it fails.
#pragma once

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace mp::bench {

// Runs `command`, its stdout into `out`, its stderr into `out`.log; throws
// std::runtime_error naming the command and the log where it fails.
inline void RunCommand(const std::string& command, const std::string& out) {
  if (std::system((command + " > " + out + " 2> " + out + ".log").c_str()) != 0) {
    throw std::runtime_error("failed: " + command + " (see " + out + ".log)");
  }
}

}  // namespace mp::bench
