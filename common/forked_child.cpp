#include "common/forked_child.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>

#include "common/error.h"

namespace mp {
namespace {

// The child's first byte: what follows is the result, or its failure.
constexpr char kResult = 'r';
constexpr char kFailure = 'f';

void WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the parent is gone or stopped reading: nothing to tell
    done += size_t(n);
  }
}

std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

std::string HowItEnded(int status) {
  if (WIFSIGNALED(status)) return Concat("died of signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)), ")");
  return Concat("exited with status ", WEXITSTATUS(status), " without a result");
}

}  // namespace

ForkedChild::ForkedChild(const std::function<std::string()>& body) {
  int fds[2];
  if (pipe(fds) != 0) throw Error(Concat("cannot make a pipe for a child process: ", std::strerror(errno)));
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ < 0) {
    const int error = errno;
    close(fds[0]);
    close(fds[1]);
    throw Error(Concat("cannot start a child process: ", std::strerror(error)));
  }
  if (pid_ == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);  // the parent ended before the line above
    close(fds[0]);
    std::string out;
    try {
      out = kResult + body();
    } catch (const std::exception& e) {
      out = kFailure + FirstLine(e.what());
    } catch (...) {
      out = kFailure + std::string("an unknown exception");
    }
    WriteAll(fds[1], out);
    _exit(out[0] == kResult ? 0 : 1);
  }
  close(fds[1]);
  fd_ = fds[0];
}

ForkedChild::~ForkedChild() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (fd_ >= 0) close(fd_);
}

std::string ForkedChild::Wait(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) throw InternalError("ForkedChild::Wait called twice");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string out;
  bool timed_out = false;
  for (;;) {
    using std::chrono::milliseconds;
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fd_, POLLIN, 0};
    const int ready = poll(&p, 1, int(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;  // checks the deadline again
    char buffer[4096];
    const ssize_t n = read(fd_, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the child closed its end: it has ended
    out.append(buffer, size_t(n));
  }
  if (timed_out) kill(pid_, SIGKILL);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  close(fd_);
  fd_ = -1;
  if (timed_out) throw Error(Concat("a child process ran past ", timeout.count(), " ms and was stopped"));
  if (!out.empty() && out[0] == kResult && WIFEXITED(status) && WEXITSTATUS(status) == 0) return out.substr(1);
  if (!out.empty() && out[0] == kFailure) throw Error(out.substr(1));
  throw Error(Concat("a child process ", HowItEnded(status)));
}

}  // namespace mp
