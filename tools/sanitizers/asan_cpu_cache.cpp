// The ASan build's CPU tensor allocator: freed tensor memory kept for the
// next tensor of the same size, as glibc keeps it in the plain build.
//
// tools/sanitize.sh asan configures with -DMP_ASAN_CPU_CACHE=ON, which
// links this file into mpplan, mpexec, the example and every LibTorch test;
// the plain build never has it. ASan's allocator maps every block over 128
// KiB afresh and unmaps it when it is freed (the plain build's
// KeepFreedMemory, common/allocator.h, sets glibc's options, which ASan does
// not read), so each large tensor faulted in its pages and their shadow
// again: a test_training case took 780,000 page faults under ASan against
// 74,000 in the plain build, 8 s of system time of its 18 s (5.3 s with
// this file).
//
// Blocks of 128 KiB and more go back to a table by their exact size, up to
// 256 MiB in all (the rest are freed), and the next request of that size
// takes one: same size, so ASan still reports an access one byte past the
// tensor. A kept block is poisoned, so a use after free is still a report
// (use-after-poison rather than heap-use-after-free; MP_ASAN_CPU_CACHE=0 in
// the environment turns the table off, and the report then names the
// free's stack).
//
// Not for TSan, whose allocator maps large blocks afresh too (1.5 million
// faults in the same case). Tried there: blocks made and freed in this
// file were, to TSan, writes racing with Gloo's sending thread's read of
// them (writev; test_training's processes case), which Gloo orders with
// its waiters in ways TSan cannot see. LibTorch makes and frees them from
// libc10, whose calls TSan ignores (tools/sanitizers/tsan.supp's
// called_from_lib), and a fresh block's shadow starts clean; made there
// too, a kept block would still carry such a read to its next owner, and
// TSan has no call that clears a block's shadow short of freeing it.
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <sanitizer/allocator_interface.h>
#include <sanitizer/asan_interface.h>

#include <cstdlib>  // getenv
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "common/sanitizer_build.h"

static_assert(mp::kUnderAddressSanitizer, "asan_cpu_cache.cpp is for the ASan build (tools/sanitize.sh asan)");

namespace {

constexpr size_t kSmallestKept = size_t(128) << 10;  // ASan's allocator keeps smaller blocks
constexpr size_t kMostKept = size_t(256) << 20;

// LibTorch's own CPU allocator, which makes every block (its alignment, its
// out-of-memory error) and frees those not kept.
c10::Allocator* g_libtorch = nullptr;
c10::DeleterFnPtr g_libtorch_free = nullptr;

struct KeptBlocks {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<void*>> by_size;
  size_t bytes = 0;
};

KeptBlocks& Kept() {
  static KeptBlocks* kept = new KeptBlocks();  // never destroyed: tensors may be freed after main returns
  return *kept;
}

void* Take(size_t bytes) {
  if (bytes >= kSmallestKept) {
    KeptBlocks& kept = Kept();
    const std::lock_guard<std::mutex> lock(kept.mutex);
    auto it = kept.by_size.find(bytes);
    if (it != kept.by_size.end() && !it->second.empty()) {
      void* data = it->second.back();
      it->second.pop_back();
      kept.bytes -= bytes;
      ASAN_UNPOISON_MEMORY_REGION(data, bytes);
      return data;
    }
  }
  return g_libtorch->raw_allocate(bytes);
}

void Give(void* data) {
  if (!data) return;
  const size_t bytes = __sanitizer_get_allocated_size(data);  // the size asked for
  if (bytes >= kSmallestKept) {
    KeptBlocks& kept = Kept();
    const std::lock_guard<std::mutex> lock(kept.mutex);
    if (kept.bytes + bytes <= kMostKept) {
      ASAN_POISON_MEMORY_REGION(data, bytes);
      kept.by_size[bytes].push_back(data);
      kept.bytes += bytes;
      return;
    }
  }
  g_libtorch_free(data);
}

// Both allocate signatures and copy_data without `override`, as in
// planner/profile/memory_meter.cpp: LibTorch 1.13 declares allocate const
// and has no copy_data; 2.3 and later declare allocate non-const and
// copy_data pure.
class CachingCpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) const {
    void* data = Take(n);
    return {data, data, &Give, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DataPtr allocate(size_t n) { return static_cast<const CachingCpuAllocator*>(this)->allocate(n); }

  c10::DeleterFnPtr raw_deleter() const { return &Give; }

  void copy_data(void* dest, const void* src, std::size_t count) const { std::memcpy(dest, src, count); }
};

// Before main: LibTorch's default CPU allocator (priority 0) is registered
// by then, and the memory meter (255) wraps this one when it is installed.
// MP_ASAN_CPU_CACHE=0 in the environment leaves LibTorch's allocator in
// place. Never destroyed: tensors are freed after main returns.
[[maybe_unused]] const bool installed = [] {
  const char* setting = std::getenv("MP_ASAN_CPU_CACHE");
  if (setting && std::strcmp(setting, "0") == 0) return false;
  g_libtorch = c10::GetAllocator(c10::DeviceType::CPU);
  g_libtorch_free = g_libtorch->raw_deleter();
  c10::SetAllocator(c10::DeviceType::CPU, new CachingCpuAllocator(), /*priority=*/1);
  return true;
}();

}  // namespace
