// Threads kept from one pipeline step to the next. A step runs one worker
// per stage (and, across processes, bridge threads), each of which waits on
// the others, so every job needs a thread of its own; starting and joining
// those threads every step cost 0.1-0.2 ms of a step (ConvNet's is 9 ms),
// where waking a kept one costs a hand-off.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace mp {

class WorkerPool {
 public:
  WorkerPool() = default;
  ~WorkerPool();  // joins the threads
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Runs every job at once, each on a thread of its own (started the first
  // time this many are needed), and returns when all have returned; then
  // rethrows the first job's exception, if any threw. Calls from several
  // threads run one after another.
  void RunAll(std::vector<std::function<void()>> jobs);

 private:
  struct Slot {
    std::function<void()> job;  // set: run it
    std::exception_ptr error;
    std::condition_variable wake;
    std::thread thread;
  };
  void Loop(Slot& slot);

  std::mutex run_mutex_;  // one RunAll at a time
  std::mutex mutex_;      // the slots' jobs, pending_ and stopping_
  std::condition_variable done_;
  std::vector<std::unique_ptr<Slot>> slots_;
  size_t pending_ = 0;
  bool stopping_ = false;
};

}  // namespace mp
