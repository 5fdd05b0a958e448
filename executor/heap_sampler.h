// The CPU heap's high-water mark over a span of time, sampled off the hot
// path: a thread reads HeapBytesInUse every millisecond (mallinfo2 walks the
// heap's free lists under its lock, too slow to call after every action).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace mp {

class HeapSampler {
 public:
  HeapSampler();
  ~HeapSampler();  // stops the thread
  HeapSampler(const HeapSampler&) = delete;
  HeapSampler& operator=(const HeapSampler&) = delete;

  // Stops sampling (after one last sample) and returns the highest reading;
  // -1 where the heap cannot be read.
  int64_t Stop();

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  int64_t peak_ = -1;
  std::thread thread_;
};

}  // namespace mp
