// common/forked_child.h: a function run in a forked child process, what it
// returns read back here, and every way it can end without a result said
// in one line, the child never left behind.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <stdexcept>
#include <string>

#include "common/error.h"
#include "common/forked_child.h"

using namespace std::chrono_literals;

TEST_CASE("a child's result comes back, computed in its own process from a copy of this one's memory") {
  int value = 20;
  const pid_t parent = getpid();
  mp::ForkedChild child([&] {
    value += 1;  // the child's copy
    return std::to_string(value) + (getpid() != parent ? " elsewhere" : " here");
  });
  CHECK(child.Wait(10s) == "21 elsewhere");
  CHECK(value == 20);
}

TEST_CASE("a result larger than a pipe holds comes back whole") {
  mp::ForkedChild child([] { return std::string(1 << 20, 'x'); });
  CHECK(child.Wait(10s) == std::string(1 << 20, 'x'));
}

TEST_CASE("a child's exception comes back as its first line") {
  mp::ForkedChild child([]() -> std::string { throw std::runtime_error("the rank broke\nat line 3"); });
  CHECK_THROWS_WITH_AS(child.Wait(10s), "the rank broke", mp::Error);
}

TEST_CASE("a child that dies or exits without a result is said to") {
  mp::ForkedChild killed([]() -> std::string {
    raise(SIGKILL);
    return "never";
  });
  CHECK_THROWS_WITH_AS(killed.Wait(10s), "a child process died of signal 9 (Killed)", mp::Error);
  mp::ForkedChild exited([]() -> std::string { _exit(3); });
  CHECK_THROWS_WITH_AS(exited.Wait(10s), "a child process exited with status 3 without a result", mp::Error);
}

TEST_CASE("a child that runs past its time is stopped, and one not waited for is reaped") {
  const auto start = std::chrono::steady_clock::now();
  mp::ForkedChild slow([]() -> std::string {
    for (;;) pause();
  });
  CHECK_THROWS_WITH_AS(slow.Wait(200ms), "a child process ran past 200 ms and was stopped", mp::Error);
  CHECK(std::chrono::steady_clock::now() - start < 5s);
  {
    mp::ForkedChild forgotten([]() -> std::string {
      for (;;) pause();
    });
  }
  // The destructor killed and reaped it: this process has no child left,
  // running or a zombie.
  errno = 0;
  CHECK(waitpid(-1, nullptr, WNOHANG) == -1);
  CHECK(errno == ECHILD);
}
