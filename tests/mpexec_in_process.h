// Test helper: `mpexec ARGS` run in the test's own process (RunMpexec, the
// function mpexec's main is), its status and its stdout and stderr
// together, as run_tool.h's RunTool gives them for the binary. Like
// mpplan_in_process.h, it spares each run LibTorch's start (0.7 s of CPU,
// 2-3 s under ASan). With --launch-local this process is the launcher and
// the ranks are the mpexec binary. What only a process of its own can show (an
// exit by a signal, Ctrl-C, torchrun's environment, the bad-input table)
// still runs the binary.
#pragma once

#include <sstream>
#include <string>

#include "apps/mpexec/run_mpexec.h"
#include "mpplan_in_process.h"

namespace mp::test {

inline ToolRun MpexecInProcess(const std::string& args) {
  std::ostringstream out;
  ToolRun run;
  run.status = RunMpexec(SplitArgs(args), out, out, MP_MPEXEC);
  run.out = out.str();
  return run;
}

// As MP_MPEXEC_CPU (run_tool.h) runs the binary: CPU workers, no warm-up.
inline ToolRun MpexecCpuInProcess(const std::string& args) {
  return MpexecInProcess("--device cpu --warmup 0 " + args);
}

}  // namespace mp::test
