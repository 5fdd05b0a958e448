// The calling thread's intra-op thread count: set for a scope and restored
// after it (mpexec's drift probe), or set for good (the pipeline's threads).
#pragma once

#include <ATen/Parallel.h>

#include <exception>
#include <thread>

namespace mp {

// Sets the calling thread's intra-op thread count to `threads` unless it is
// that already. at::set_num_threads is not free at the count a thread
// has: it rebuilds LibTorch's thread pool and clears oneDNN's cache of
// kernels, for the whole process. Called at every step (by each worker,
// and around the step by its calling thread, whose count started at
// LibTorch's default: 1 on this project's 2-core VM), it made every step's
// first forward pay for that: a one-stage MLP plan of 2 threads read it at
// 2.4-4.4x the later ones, after a wait of 2-9 ms to begin (bench_exec
// --only threads).
inline void UseThreads(int threads) {
  if (threads > 0 && at::get_num_threads() != threads) at::set_num_threads(threads);
}

class ScopedThreads {
 public:
  // threads <= 0 leaves the count as it is.
  explicit ScopedThreads(int threads) : before_(at::get_num_threads()) {
    if (threads > 0 && threads != before_) at::set_num_threads(threads);
  }
  ~ScopedThreads() {
    if (at::get_num_threads() != before_) at::set_num_threads(before_);
  }
  ScopedThreads(const ScopedThreads&) = delete;
  ScopedThreads& operator=(const ScopedThreads&) = delete;

 private:
  int before_;
};

// Runs `work` on a thread of its own with `threads` intra-op threads, and
// waits for it (its exception rethrown here). The OpenMP team a thread
// makes outlives its parallel regions, idle until the thread ends, and
// libgomp counts its threads with every other team's: once they outnumber
// the cores, every team waits for its next region on a futex instead of
// spinning. So work of more than one thread that mpexec's own thread would
// run beside the stages' (the drift reference, --verify's references) runs
// on a thread that ends with it, and that thread keeps one: a one-stage
// MLP plan of 2 threads, its stage's team beside that thread's idle one on
// 2 cores, switched context 7,500 times in 20 steps against 260, and its
// Adam step took 14-15 ms against 7-10 (8.1 predicted).
template <typename Work>
void RunOnOwnThread(int threads, Work&& work) {
  std::exception_ptr failed;
  std::thread([&] {
    try {
      UseThreads(threads);
      work();
    } catch (...) {
      failed = std::current_exception();
    }
  }).join();
  if (failed) std::rethrow_exception(failed);
}

}  // namespace mp
