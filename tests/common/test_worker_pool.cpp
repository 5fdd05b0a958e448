// common/worker_pool.h: the threads a pipeline step's stages run on, kept
// from step to step.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "common/worker_pool.h"

namespace {

using Clock = std::chrono::steady_clock;

// True once `count` reaches `want`; false after 10 s (jobs run one after
// another would never get there, and a test must not hang).
bool WaitFor(const std::atomic<int>& count, int want) {
  const Clock::time_point until = Clock::now() + std::chrono::seconds(10);
  while (count.load() < want) {
    if (Clock::now() > until) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace

TEST_CASE("every job runs at once, on threads kept from one call to the next") {
  mp::WorkerPool pool;
  for (int jobs : {3, 1, 4}) {  // grows from 3 threads to 4, and reuses them
    CAPTURE(jobs);
    std::atomic<int> arrived{0};
    std::vector<char> met(jobs, 0);
    std::vector<std::thread::id> ids(jobs);
    std::vector<std::function<void()>> work;
    for (int j = 0; j < jobs; ++j) {
      work.push_back([&, j] {
        ids[j] = std::this_thread::get_id();
        arrived.fetch_add(1);
        met[j] = WaitFor(arrived, jobs);  // like stages, each waits for the others
      });
    }
    pool.RunAll(std::move(work));
    for (int j = 0; j < jobs; ++j) CHECK(met[j]);
    CHECK(std::set<std::thread::id>(ids.begin(), ids.end()).size() == size_t(jobs));
    CHECK(std::count(ids.begin(), ids.end(), std::this_thread::get_id()) == 0);
  }
  // The same threads again: none started for a call that needs no more.
  std::vector<std::thread::id> first(2), second(2);
  for (auto* ids : {&first, &second}) {
    std::vector<std::function<void()>> work;
    for (int j = 0; j < 2; ++j) work.push_back([ids, j] { (*ids)[j] = std::this_thread::get_id(); });
    pool.RunAll(std::move(work));
  }
  CHECK(first == second);
}

TEST_CASE("a job's exception comes back from RunAll once every job has returned") {
  mp::WorkerPool pool;
  std::atomic<bool> slow_done{false};
  std::vector<std::function<void()>> work;
  work.push_back([] { throw std::runtime_error("stage 0 failed"); });
  work.push_back([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    slow_done = true;
  });
  CHECK_THROWS_WITH_AS(pool.RunAll(std::move(work)), "stage 0 failed", std::runtime_error);
  CHECK(slow_done);
  // The pool is still usable, and the old error does not come back.
  std::atomic<int> ran{0};
  pool.RunAll({[&] { ran.fetch_add(1); }, [&] { ran.fetch_add(1); }});
  CHECK(ran == 2);
}
