// mpexec --launch-local N: N processes of mpexec on this machine, one rank
// each, as `torchrun --standalone --nproc-per-node N` would start them
// (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR=127.0.0.1, a free MASTER_PORT).
// Their output is forwarded line by line with a "[rank R] " prefix; rank 0's
// result comes back through a private folder and is printed as one process
// would print it. The first rank to fail ends the run: the others get a
// grace period to stop on their own (they see that rank gone), then
// SIGTERM and SIGKILL. Ctrl-C (SIGINT or SIGTERM) stops every child.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace mp {

struct LaunchRequest {
  std::string program;            // the mpexec binary
  std::vector<std::string> args;  // its arguments without --launch-local
  int processes = 2;
  int timeout_s = 300;            // --timeout: also bounds the grace period
  bool json = false;
};

// Runs the ranks and prints the result on `out` or one error line on `err`
// (starting "mpexec: "); the ranks' own lines go to `out` (stdout) and `err`
// (stderr, and all of them with --json). Returns the exit status: rank 0's
// when all succeed, else the first failing rank's (1 when it died by a
// signal), 130 after Ctrl-C.
int LaunchLocal(const LaunchRequest& request, std::ostream& out, std::ostream& err);

// The processes `mpexec PLAN` starts by itself when no launcher started it
// (no torchrun environment): a plan with replicas runs over processes, one
// per device of every copy (PlanWorkers); 0 for a plan one process runs.
int ProcessesToLaunch(const std::string& plan_path);

// Inside a rank the launcher started: the folder it reads results from.
std::optional<std::string> LauncherFolder();

// Writes `text` as rank `rank`'s result (rank 0's JSON object) or error
// line into the launcher's folder.
void ReportToLauncher(const std::string& folder, int rank, const std::string& kind, const std::string& text);

}  // namespace mp
