#include "planner/profile/memory_meter.h"

#include <c10/core/Allocator.h>

#include <cstdint>
#include <cstring>
#include <mutex>
#include <unordered_map>

namespace mp {
namespace {

thread_local int g_owner = MemoryMeter::kOutside;
thread_local int g_tag = -1;

int Slot(int owner) { return owner >= 0 && owner < MemoryMeter::kOwners ? owner : MemoryMeter::kOutside; }

// The allocations made through the meter: the wrapped allocator's pointer,
// who it is charged to and how big it is, by address. The pointer handed
// out is its own context, as LibTorch's raw_allocate (oneDNN's buffers)
// requires of the CPU allocator.
struct Entry {
  c10::DataPtr inner;
  int owner;
  int64_t bytes;
  int tag;
};

struct Table {
  std::mutex mutex;
  std::unordered_map<void*, Entry> entries;
};

MemoryMeter* g_meter = nullptr;  // set once by Install, never destroyed
Table* g_table = nullptr;
// The wrapped allocator's raw deleter: what frees an allocation made while
// not counting when it comes back through raw_deallocate (oneDNN's
// scratch buffers do), which asks this allocator's raw_deleter.
c10::DeleterFnPtr g_inner_raw_deleter = nullptr;

void Free(void* data) {
  Entry entry;
  {
    const std::lock_guard<std::mutex> lock(g_table->mutex);
    auto it = g_table->entries.find(data);
    if (it == g_table->entries.end()) {  // made while not counting
      if (g_inner_raw_deleter) g_inner_raw_deleter(data);
      return;
    }
    entry = std::move(it->second);
    g_table->entries.erase(it);
  }
  g_meter->Remove(entry.owner, entry.bytes);
}  // entry.inner frees the memory here, outside the lock

// Both allocate signatures and copy_data without `override`: LibTorch 1.13
// declares allocate const and has no copy_data; 2.3 and later declare
// allocate non-const and copy_data pure. Each build overrides its own.
class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* inner) : inner_(inner) {}

  c10::DataPtr allocate(size_t n) const {
    c10::DataPtr inner = inner_->allocate(n);
    void* data = inner.get();
    if (!data || !g_meter->Counting()) return inner;  // zero bytes, or not counting now
    const c10::Device device = inner.device();
    const int owner = MemoryMeter::CurrentOwner();
    {
      const std::lock_guard<std::mutex> lock(g_table->mutex);
      const bool fresh = g_table->entries.try_emplace(data, Entry{std::move(inner), owner, int64_t(n), g_tag}).second;
      // An address handed out twice would be a freed block still in the
      // table: its entry would free what is returned now.
      TORCH_INTERNAL_ASSERT(fresh, "memory meter: address allocated twice");
    }
    g_meter->Add(owner, int64_t(n));
    return {data, data, &Free, device};
  }
  c10::DataPtr allocate(size_t n) { return static_cast<const CountingAllocator*>(this)->allocate(n); }

  c10::DeleterFnPtr raw_deleter() const { return &Free; }  // no `override`: as allocate, for clang's sake

  void copy_data(void* dest, const void* src, std::size_t count) const { std::memcpy(dest, src, count); }

 private:
  c10::Allocator* inner_;
};

}  // namespace

MemoryMeter::Scope::Scope(int owner) : before_(g_owner) { g_owner = Slot(owner); }
MemoryMeter::Scope::~Scope() { g_owner = before_; }

int MemoryMeter::CurrentOwner() { return g_owner; }

MemoryMeter::Tag::Tag(int tag) : before_(g_tag) { g_tag = tag; }
MemoryMeter::Tag::~Tag() { g_tag = before_; }

int MemoryMeter::OwnerOf(const void* data) const {
  const std::lock_guard<std::mutex> lock(g_table->mutex);
  auto it = g_table->entries.find(const_cast<void*>(data));
  return it == g_table->entries.end() ? -1 : it->second.owner;
}

std::unordered_map<int, int64_t> MemoryMeter::LiveByTag() const {
  std::unordered_map<int, int64_t> live;
  const std::lock_guard<std::mutex> lock(g_table->mutex);
  for (const auto& [data, entry] : g_table->entries) {
    if (entry.tag >= 0) live[entry.tag] += entry.bytes;
  }
  return live;
}

MemoryMeter& MemoryMeter::Install() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Never destroyed: tensors charged to it may outlive main's return.
    g_table = new Table();
    g_meter = new MemoryMeter();
    c10::Allocator* inner = c10::GetAllocator(c10::DeviceType::CPU);
    g_inner_raw_deleter = inner->raw_deleter();
    c10::SetAllocator(c10::DeviceType::CPU, new CountingAllocator(inner), /*priority=*/255);
  });
  return *g_meter;
}

MemoryMeter* MemoryMeter::Installed() { return g_meter; }

void MemoryMeter::SetCounting(bool on) { counting_.store(on, std::memory_order_relaxed); }

bool MemoryMeter::Counting() const { return counting_.load(std::memory_order_relaxed); }

void MemoryMeter::Add(int owner, int64_t bytes) {
  const int slot = Slot(owner);
  const int64_t now = live_[slot].fetch_add(bytes, std::memory_order_relaxed) + bytes;
  int64_t peak = peak_[slot].load(std::memory_order_relaxed);
  while (now > peak && !peak_[slot].compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

void MemoryMeter::Remove(int owner, int64_t bytes) { live_[Slot(owner)].fetch_sub(bytes, std::memory_order_relaxed); }

int64_t MemoryMeter::Live(int owner) const { return live_[Slot(owner)].load(std::memory_order_relaxed); }

int64_t MemoryMeter::Peak(int owner) const { return peak_[Slot(owner)].load(std::memory_order_relaxed); }

void MemoryMeter::ResetPeaks() {
  for (int i = 0; i <= kOwners; ++i) {
    peak_[i].store(live_[i].load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
}

}  // namespace mp
