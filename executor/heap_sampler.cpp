// HeapSampler: a thread that waits on a condition variable with a 1 ms
// timeout, so Stop() ends it at once.
#include "executor/heap_sampler.h"

#include <algorithm>
#include <chrono>

#include "common/allocator.h"

namespace mp {

HeapSampler::HeapSampler() {
  peak_ = HeapBytesInUse();
  if (peak_ < 0) return;  // nothing to sample
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!wake_.wait_for(lock, std::chrono::milliseconds(1), [this] { return stop_; })) {
      lock.unlock();
      const int64_t now = HeapBytesInUse();
      lock.lock();
      peak_ = std::max(peak_, now);
    }
  });
}

HeapSampler::~HeapSampler() { Stop(); }

int64_t HeapSampler::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (peak_ >= 0) peak_ = std::max(peak_, HeapBytesInUse());
  return peak_;
}

}  // namespace mp
