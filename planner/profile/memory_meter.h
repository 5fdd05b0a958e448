// Live CPU tensor bytes per device worker, like torch.cuda.memory_allocated
// and max_memory_allocated per GPU. CPU workers share one heap, so the
// heap's own figures (heap_sampler.h) cannot say which stage holds what;
// this wraps the CPU allocator installed before it (in mpplan and mpexec
// the aligning one, aligning_allocator.h), registered through
// c10::SetAllocator as a caching allocator would be, and charges each
// allocation to the worker whose thread made it, and its free to that worker too, whichever
// thread frees it. Allocations made outside a worker (loading, the
// optimizer step, gathering) are charged to kOutside. It counts only while
// counting is on (mpexec: the last warm-up step, as it samples the heap):
// each counted allocation costs a lock and a table entry, 2-10% of a
// ConvNet step of 6 ms; otherwise the wrapped allocator's own DataPtr is
// handed out, and only the frees of counted tensors come back here.
#pragma once

#include <atomic>
#include <cstdint>
#include <unordered_map>

namespace mp {

class MemoryMeter {
 public:
  static constexpr int kOwners = 64;         // workers counted one by one
  static constexpr int kOutside = kOwners;   // everything else

  // Installs the counting allocator (once per process; later calls return
  // the same meter). Tensors allocated before it are not counted.
  static MemoryMeter& Install();
  // The installed meter, or nullptr.
  static MemoryMeter* Installed();

  // Charges the calling thread's allocations to `owner` (a worker index;
  // kOutside, or beyond kOwners: outside) for the scope.
  class Scope {
   public:
    explicit Scope(int owner);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    int before_;
  };

  // Whether allocations are counted from now on (off when installed).
  void SetCounting(bool on);
  bool Counting() const;

  // Counting on for the scope, off after it, also when it throws.
  class CountingScope {
   public:
    explicit CountingScope(MemoryMeter* meter) : meter_(meter) {
      if (meter_) meter_->SetCounting(true);
    }
    ~CountingScope() {
      if (meter_) meter_->SetCounting(false);
    }
    CountingScope(const CountingScope&) = delete;
    CountingScope& operator=(const CountingScope&) = delete;

   private:
    MemoryMeter* meter_;
  };

  // Marks the calling thread's counted allocations with `tag` (>= 0) for
  // the scope: the profiler tags each node's, to learn what stays alive.
  class Tag {
   public:
    explicit Tag(int tag);
    ~Tag();
    Tag(const Tag&) = delete;
    Tag& operator=(const Tag&) = delete;

   private:
    int before_;
  };
  // The bytes of counted allocations still alive, by the tag they were
  // made under (untagged ones left out).
  std::unordered_map<int, int64_t> LiveByTag() const;

  // The owner a counted allocation at `data` is charged to; -1 for memory
  // the meter did not count.
  int OwnerOf(const void* data) const;

  int64_t Live(int owner) const;
  // The most `owner` held at once since the last ResetPeaks.
  int64_t Peak(int owner) const;
  // Every owner's peak back to what it holds now.
  void ResetPeaks();

  // Bookkeeping of the allocator (memory_meter.cpp).
  void Add(int owner, int64_t bytes);
  void Remove(int owner, int64_t bytes);
  static int CurrentOwner();

 private:
  MemoryMeter() = default;
  std::atomic<bool> counting_{false};
  std::atomic<int64_t> live_[kOwners + 1] = {};
  std::atomic<int64_t> peak_[kOwners + 1] = {};
};

}  // namespace mp
