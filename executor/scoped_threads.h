// The calling thread's intra-op thread count, set for a scope and restored
// after it (the pipeline's calling thread, mpexec's drift probe).
#pragma once

#include <ATen/Parallel.h>

namespace mp {

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

}  // namespace mp
