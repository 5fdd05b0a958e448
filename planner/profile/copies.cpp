#include "planner/profile/copies.h"

#include <ATen/Parallel.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>

#include "common/cpu_affinity.h"

namespace mp {

RunTimes RunCopy(WholeGraph& graph, CopySync& sync, int index, int copies, double stagger_ms) {
  sync.ready.fetch_add(1);
  while (sync.ready.load() < copies) std::this_thread::yield();  // start together
  if (stagger_ms > 0) {
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(stagger_ms * index / copies));
  }
  sync.started.fetch_add(1);
  RunTimes sample;
  bool counted = false;
  try {
    // A copy that has its sample runs again, untimed, until every copy has
    // one.
    while (sync.counted.load() < copies) {
      const bool all_started = sync.started.load() == copies;
      RunTimes times;
      times.forward_ms = graph.Forward();
      times.backward_ms = graph.Backward();
      if (!counted && all_started) {
        sample = times;
        counted = true;
        sync.counted.fetch_add(1);
      }
    }
  } catch (...) {
    if (!counted) sync.counted.fetch_add(1);
    throw;
  }
  return sample;
}

namespace {

class ThreadCopies : public Copies {
 public:
  ThreadCopies(std::vector<std::unique_ptr<WholeGraph>> graphs, int threads)
      : graphs_(std::move(graphs)), samples_(graphs_.size()), errors_(graphs_.size()), threads_per_copy_(threads) {}

  ~ThreadCopies() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }

  int Count() const override { return int(graphs_.size()); }

  std::vector<RunTimes> Run(int first, int copies, double stagger_ms) override {
    // The threads start at the first run, not when built: a child process
    // forked while one of them held a lock of LibTorch's (at::set_num_threads
    // as it started) waited for it forever (process_copies.h).
    if (threads_.empty()) {
      for (size_t w = 0; w < graphs_.size(); ++w)
        threads_.emplace_back([this, w] { Loop(static_cast<int>(w), threads_per_copy_); });
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      first_ = first;
      copies_ = copies;
      stagger_ms_ = stagger_ms;
      sync_.Reset();
      finished_ = 0;
      std::fill(errors_.begin(), errors_.end(), nullptr);
      ++generation_;
    }
    wake_.notify_all();
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return finished_ == copies_; });
    for (int w = first; w < first + copies; ++w)
      if (errors_[w]) std::rethrow_exception(errors_[w]);
    return std::vector<RunTimes>(samples_.begin() + first, samples_.begin() + first + copies);
  }

 private:
  void Loop(int w, int threads) {
    PinThisThread(WorkerCpus(w, int(graphs_.size()), threads));
    at::set_num_threads(threads);
    uint64_t seen = 0;
    for (;;) {
      int first = 0, copies = 0;
      double stagger_ms = 0;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        first = first_;
        copies = copies_;
        stagger_ms = stagger_ms_;
      }
      if (w < first || w >= first + copies) continue;
      try {
        samples_[w] = RunCopy(*graphs_[w], sync_, w - first, copies, stagger_ms);
      } catch (...) {
        errors_[w] = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ++finished_;
      }
      done_.notify_one();
    }
  }

  std::vector<std::unique_ptr<WholeGraph>> graphs_;
  std::vector<RunTimes> samples_;
  std::vector<std::exception_ptr> errors_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  uint64_t generation_ = 0;
  int first_ = 0, copies_ = 0;
  double stagger_ms_ = 0;
  int finished_ = 0;
  bool stop_ = false;
  CopySync sync_;
  int threads_per_copy_;
};

}  // namespace

std::unique_ptr<Copies> CopiesOnThreads(std::vector<std::unique_ptr<WholeGraph>> graphs, int threads) {
  return std::make_unique<ThreadCopies>(std::move(graphs), threads);
}

}  // namespace mp
