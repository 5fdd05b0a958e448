// LaunchLocal: fork and exec one mpexec per rank with torchrun's variables,
// then one poll loop forwards their output, reaps them, and enforces the
// grace period and Ctrl-C. Ranks report through files in a private folder
// (MPEXEC_LAUNCH_DIR): rank 0's JSON result, each failing rank's error line,
// so the launcher can print one result or one error the way a single
// process would, however many ranks there are.
#include "executor/launch_local.h"

#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <map>
#include <set>

#include "common/atomic_file.h"
#include "common/cpu_affinity.h"
#include "common/error.h"
#include "executor/pipeline.h"
#include "executor/process_group.h"
#include "planner/plan/plan_reader.h"

extern char** environ;

namespace mp {
namespace {

constexpr const char* kFolderVariable = "MPEXEC_LAUNCH_DIR";
using Clock = std::chrono::steady_clock;

volatile std::sig_atomic_t g_stop = 0;
void OnStop(int signal) { g_stop = signal; }

struct Rank {
  pid_t pid = -1;
  int fds[2] = {-1, -1};       // its stdout, stderr
  std::string partial[2];      // an unfinished line per stream
  bool running = true;
  bool stopped = false;        // still running when the launcher stopped the ranks
  int status = 0;              // waitpid's
};

std::string DescribeExit(int status) {
  if (WIFSIGNALED(status)) {
    return Concat("died of signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)), ")");
  }
  return Concat("exited with status ", WEXITSTATUS(status));
}

int ExitCode(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 1; }

std::string ReadIfThere(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

// Forks the ranks with torchrun's environment (and the folder they report
// to), each one's stdout and stderr on a pipe of ours; with MP_PIN_CPUS=1
// each bound to its share of this process's cores (RankCpus).
std::vector<Rank> StartRanks(const LaunchRequest& request, const std::filesystem::path& folder, int port) {
  // Everything the children need is built before the first fork: after it,
  // the child only calls what is safe there.
  std::vector<std::string> args = {request.program};
  args.insert(args.end(), request.args.begin(), request.args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> base_env;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    if (name != "RANK" && name != "WORLD_SIZE" && name != "LOCAL_RANK" && name != "LOCAL_WORLD_SIZE" &&
        name != "MASTER_ADDR" && name != "MASTER_PORT" && name != kFolderVariable && name != "GLOG_minloglevel") {
      base_env.push_back(entry);
    }
  }
  const int n = request.processes;
  std::vector<Rank> ranks(n);
  const pid_t launcher = getpid();
  for (int r = 0; r < n; ++r) {
    std::vector<std::string> env = base_env;
    for (const std::string& e : {Concat("RANK=", r), Concat("LOCAL_RANK=", r), Concat("WORLD_SIZE=", n),
                                 Concat("LOCAL_WORLD_SIZE=", n), std::string("MASTER_ADDR=127.0.0.1"),
                                 Concat("MASTER_PORT=", port), Concat(kFolderVariable, "=", folder.string()),
                                 // c10d logs through glog: failures reach the launcher as errors instead
                                 std::string("GLOG_minloglevel=3")}) {
      env.push_back(e);
    }
    std::vector<char*> envp;
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    // Pinned, each rank on its own share of the cores (RankCpus), set here
    // so that every thread it starts inherits it: its worker, Gloo's,
    // OpenMP's.
    cpu_set_t cores;
    CPU_ZERO(&cores);
    const std::vector<int> bound = RankCpus(r, n);
    for (int c : bound) CPU_SET(c, &cores);
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
      throw Error(Concat("--launch-local: cannot make pipes: ", std::strerror(errno)));
    }
    const pid_t pid = fork();
    if (pid < 0) throw Error(Concat("--launch-local: cannot start rank ", r, ": ", std::strerror(errno)));
    if (pid == 0) {
      dup2(out[1], STDOUT_FILENO);
      dup2(err[1], STDERR_FILENO);
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // the launcher gone, even by SIGKILL: so are the ranks
      if (getppid() != launcher) _exit(1);
      if (!bound.empty()) (void)sched_setaffinity(0, sizeof cores, &cores);  // a refusal leaves it unbound
      execve(argv[0], argv.data(), envp.data());
      const char message[] = "mpexec: --launch-local: cannot run this program again\n";
      (void)!write(STDERR_FILENO, message, sizeof(message) - 1);
      _exit(127);
    }
    close(out[1]);
    close(err[1]);
    ranks[r].pid = pid;
    ranks[r].fds[0] = out[0];
    ranks[r].fds[1] = err[0];
  }

  return ranks;
}

// Forwards the ranks' output line by line, prefixed with the rank, until
// every rank has ended. After a failure the others get a grace period, then
// SIGTERM and, 3 s later, SIGKILL; so does a signal to the launcher.
// Returns the ranks that failed, in the order their failures were seen.
std::vector<int> Supervise(std::vector<Rank>& ranks, const LaunchRequest& request, std::ostream& out,
                           std::ostream& err) {
  const int n = int(ranks.size());
  struct sigaction action {};
  action.sa_handler = OnStop;
  sigemptyset(&action.sa_mask);
  struct sigaction old_int {}, old_term {};
  sigaction(SIGINT, &action, &old_int);
  sigaction(SIGTERM, &action, &old_term);

  // Forwards complete lines; at the end, what is left.
  const auto forward = [&](int r, int stream, const char* data, size_t size, bool flush) {
    std::string& partial = ranks[r].partial[stream];
    partial.append(data, size);
    std::ostream& to = stream == 0 && !request.json ? out : err;
    size_t newline;
    while ((newline = partial.find('\n')) != std::string::npos) {
      to << "[rank " << r << "] " << partial.substr(0, newline + 1);
      partial.erase(0, newline + 1);
    }
    if (flush && !partial.empty()) to << "[rank " << r << "] " << partial << "\n", partial.clear();
    to.flush();
  };

  std::vector<int> failed;  // ranks in the order their failures were seen
  std::optional<Clock::time_point> first_failure, stop_sent;
  const auto grace = std::chrono::seconds(std::min(request.timeout_s, 10));
  bool terminated = false, killed = false;
  while (true) {
    std::vector<pollfd> fds;
    std::vector<std::pair<int, int>> owners;
    for (int r = 0; r < n; ++r) {
      for (int stream = 0; stream < 2; ++stream) {
        if (ranks[r].fds[stream] < 0) continue;
        fds.push_back({ranks[r].fds[stream], POLLIN, 0});
        owners.emplace_back(r, stream);
      }
    }
    bool running = false;
    for (const Rank& rank : ranks) running = running || rank.running;
    if (fds.empty() && !running) break;
    if (!fds.empty()) {
      poll(fds.data(), fds.size(), 100);
    } else {
      usleep(20000);
    }
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      auto [r, stream] = owners[i];
      char buffer[4096];
      const ssize_t got = read(fds[i].fd, buffer, sizeof(buffer));
      if (got > 0) {
        forward(r, stream, buffer, size_t(got), false);
      } else if (got == 0 || errno != EINTR) {
        forward(r, stream, "", 0, true);
        close(fds[i].fd);
        ranks[r].fds[stream] = -1;
      }
    }
    for (int r = 0; r < n; ++r) {
      if (!ranks[r].running || waitpid(ranks[r].pid, &ranks[r].status, WNOHANG) != ranks[r].pid) continue;
      ranks[r].running = false;
      const int code = ExitCode(ranks[r].status);
      if (!WIFEXITED(ranks[r].status) || (code != 0 && !(r == 0 && code == 4))) {
        failed.push_back(r);
        if (!first_failure) first_failure = Clock::now();
      }
    }
    const auto now = Clock::now();
    const bool stop_now = g_stop != 0 || (first_failure && now - *first_failure > grace);
    if (stop_now && !terminated) {
      for (Rank& rank : ranks) {
        if (rank.running) kill(rank.pid, SIGTERM), rank.stopped = true;
      }
      terminated = true;
      stop_sent = now;
    }
    if (terminated && !killed && now - *stop_sent > std::chrono::seconds(3)) {
      for (const Rank& rank : ranks) {
        if (rank.running) kill(rank.pid, SIGKILL);
      }
      killed = true;
    }
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);

  return failed;
}

// Removes the ranks' folder and its files. Not std::filesystem::remove_all:
// the pip LibTorch (2.11) exports a copy of it that the dynamic linker binds
// before libstdc++'s, and that copy jumps to a null address.
void RemoveFolder(const std::filesystem::path& folder) {
  const auto remove = [](const char* path, const struct stat*, int, struct FTW*) {
    std::remove(path);
    return 0;
  };
  nftw(folder.c_str(), remove, 8, FTW_DEPTH | FTW_PHYS);
}

// Rank 0's report, or one line for the failure, and the exit status.
int Conclude(const std::vector<Rank>& ranks, const std::vector<int>& failed, const std::filesystem::path& folder,
             const LaunchRequest& request, std::ostream& out, std::ostream& err) {
  const int n = int(ranks.size());
  const std::string result = ReadIfThere(folder / "0.result");
  const std::string report = ReadIfThere(folder / "0.report");
  std::map<int, std::string> errors;
  std::set<int> after_peer;  // ranks whose error came from a transfer another rank broke off
  for (int r = 0; r < n; ++r) {
    std::string error = ReadIfThere(folder / Concat(r, ".error"));
    if (!error.empty()) errors[r] = error;
    if (!ReadIfThere(folder / Concat(r, ".peer")).empty()) after_peer.insert(r);
  }
  RemoveFolder(folder);

  if (g_stop != 0) {
    err << "mpexec: interrupted (" << strsignal(g_stop) << "); stopped " << n << " rank" << (n > 1 ? "s" : "")
        << "\n";
    return 130;
  }
  if (failed.empty()) {
    if (result.empty()) {
      err << "mpexec: --launch-local: rank 0 finished without a result\n";
      return 3;
    }
    // The report as rank 0 formatted it: JSON has no NaN, so a NaN loss
    // comes back as null, which only the JSON printer takes.
    out << (request.json ? result : report) << "\n";
    return ExitCode(ranks[0].status);
  }
  // One line. The same error on every rank (a bad flag or plan) once;
  // otherwise the first rank that failed of its own accord (not from a
  // transfer another rank broke off, where which of the two exits first is
  // a race, nor stopped here), else the first that failed; then how the
  // others ended.
  bool same = int(errors.size()) == n;
  for (const auto& [r, e] : errors) same = same && e == errors.begin()->second;
  const auto own =
      std::find_if(failed.begin(), failed.end(), [&](int r) { return !after_peer.count(r) && !ranks[r].stopped; });
  const int first = own != failed.end() ? *own : failed.front();
  if (same) {
    err << "mpexec: " << errors.begin()->second << "\n";
  } else {
    err << "mpexec: rank " << first << " "
        << (errors.count(first) ? "failed: " + errors[first] : DescribeExit(ranks[first].status));
    std::vector<std::string> others;
    for (int r = 0; r < n; ++r) {
      if (r == first) continue;
      if (errors.count(r)) {
        others.push_back(Concat("rank ", r, ": ", errors[r]));
      } else if (WIFSIGNALED(ranks[r].status) || ExitCode(ranks[r].status) != 0) {
        others.push_back(Concat("rank ", r, " ", DescribeExit(ranks[r].status)));
      }
    }
    if (!others.empty()) {
      err << "; then ";
      for (size_t i = 0; i < others.size(); ++i) err << (i ? "; " : "") << others[i];
    }
    err << "\n";
  }
  return ExitCode(ranks[first].status);
}

}  // namespace

std::optional<std::string> LauncherFolder() {
  const char* folder = std::getenv(kFolderVariable);
  if (!folder || !*folder) return std::nullopt;
  return std::string(folder);
}

void ReportToLauncher(const std::string& folder, int rank, const std::string& kind, const std::string& text) {
  std::ofstream(std::filesystem::path(folder) / Concat(rank, ".", kind)) << text << "\n";
}

int ProcessesToLaunch(const std::string& plan_path) {
  if (RankEnvFromEnvironment()) return 0;
  const Plan plan = ReadPlan(plan_path);
  return plan.replicas > 1 ? PlanWorkers(plan) : 0;
}

int LaunchLocal(const LaunchRequest& request, std::ostream& out, std::ostream& err) {
  if (request.processes < 1) throw InputError(Concat("--launch-local must be at least 1, got ", request.processes));
  // Here too, not only in the ranks: a grace period of 0 would stop the
  // second rank before it says the same, and the one line would be two.
  if (request.timeout_s <= 0) throw InputError(Concat("--timeout must be at least 1 second, got ", request.timeout_s));
  char folder_template[] = "/tmp/mpexec-launch-XXXXXX";
  if (!mkdtemp(folder_template)) throw Error(Concat("--launch-local: cannot make a folder in /tmp: ", std::strerror(errno)));
  const std::filesystem::path folder = folder_template;
  const int port = FreePort();

  std::vector<Rank> ranks = StartRanks(request, folder, port);
  const std::vector<int> failed = Supervise(ranks, request, out, err);
  return Conclude(ranks, failed, folder, request, out, err);
}

}  // namespace mp
