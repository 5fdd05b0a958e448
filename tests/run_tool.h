// Test helper: run one of our command-line tools and capture its exit
// status and combined stdout/stderr.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace mp::test {

struct ToolRun {
  int status = -1;
  std::string out;
};

inline ToolRun RunTool(const std::string& binary, const std::string& args) {
  const std::string command = binary + " " + args + " 2>&1";
  ToolRun run;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return run;
  std::array<char, 4096> buffer;
  while (size_t n = fread(buffer.data(), 1, buffer.size(), pipe)) run.out.append(buffer.data(), n);
  const int status = pclose(pipe);
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return run;
}

}  // namespace mp::test

#ifdef MP_MPEXEC
// mpexec as the executor tests run it: their plans are mostly made for
// A100s (no profiling: fast) and run on CPU workers as a check, which
// mpexec refuses without --device cpu; no warm-up, since they check
// numbers, not times.
#define MP_MPEXEC_CPU MP_MPEXEC " --device cpu --warmup 0"
#endif
