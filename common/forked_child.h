// A function run in a child process forked from this one, its result read
// back as a string over a pipe. A probe that must time work as mpexec's
// ranks run it, each in a process of its own, uses it: two threads of one
// process share its heap's locks and its page tables where two processes
// do not, and the planner's figures for replicas (which run as processes)
// read 5-20% high when timed as threads (docs/profile.md).
//
// The child starts with one thread, the one that forked: `body` must start
// whatever threads it needs itself (a WorkerPool first used in the child,
// a process group made there) and must not wait for one of this process's.
// What it reaches of this process's memory is a copy of it at the fork.
// Under ThreadSanitizer a child may not start threads; callers run their
// work on threads there instead (kUnderThreadSanitizer).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>

namespace mp {

class ForkedChild {
 public:
  // Forks; the child runs `body`, writes what it returns back and exits
  // (_exit: no static destructor of this process runs there). The child
  // is killed when the thread that forked it ends (PR_SET_PDEATHSIG): fork
  // from a thread that outlives the child (mpplan's main thread does).
  // Throws Error where it cannot fork.
  explicit ForkedChild(const std::function<std::string()>& body);
  ~ForkedChild();  // a child not waited for is killed and reaped
  ForkedChild(const ForkedChild&) = delete;
  ForkedChild& operator=(const ForkedChild&) = delete;

  // Waits for the child to end, at most `timeout` (then kills it). Returns
  // what `body` returned; throws Error with its exception's first line
  // where it threw, or how it ended where it died or ran out of time.
  std::string Wait(std::chrono::milliseconds timeout);

 private:
  pid_t pid_ = -1;
  int fd_ = -1;  // the read end of the child's pipe
};

}  // namespace mp
