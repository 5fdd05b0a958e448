#include "planner/profile/aligning_allocator.h"

#include <c10/core/CPUAllocator.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "common/allocator.h"
#include "common/sanitizer_build.h"

namespace mp {
namespace {

constexpr std::uintptr_t kAlignment = 64;  // LibTorch's (c10::alloc_cpu's gAlignment)
// Blocks this large and up come from the kept heap (KeptHeapAlloc); the
// smaller from malloc, which may be jemalloc's (common/allocator.cpp).
constexpr size_t kKeptHeapFrom = size_t(64) << 10;
constexpr unsigned char kFromKeptHeap = 1;

// The byte before the block says how far in from the raw block it starts
// (2 to 65), the byte before that which heap it came from.
void FreeAligned(void* data) {
  if (data == nullptr) return;
  auto* block = static_cast<unsigned char*>(data);
  unsigned char* raw = block - block[-1];
  if (block[-2] == kFromKeptHeap) {
    KeptHeapFree(raw);
  } else {
    std::free(raw);
  }
}

// Both allocate signatures and copy_data without `override`: LibTorch 1.13
// declares allocate const and has no copy_data; 2.3 and later declare
// allocate non-const and copy_data pure. Each build overrides its own.
class AligningAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) const {
    const c10::Device cpu(c10::DeviceType::CPU);
    if (n == 0) return {nullptr, nullptr, &FreeAligned, cpu};
    const bool kept = n >= kKeptHeapFrom;
    const size_t size = n + kAlignment + 1;
    auto* raw = static_cast<unsigned char*>(kept ? KeptHeapAlloc(size) : std::malloc(size));
    if (raw == nullptr) throw std::bad_alloc();
    const std::uintptr_t at = (reinterpret_cast<std::uintptr_t>(raw) + kAlignment + 1) & ~(kAlignment - 1);
    auto* block = reinterpret_cast<unsigned char*>(at);
    block[-1] = static_cast<unsigned char>(block - raw);
    block[-2] = kept ? kFromKeptHeap : 0;
    return {block, block, &FreeAligned, cpu};
  }
  c10::DataPtr allocate(size_t n) { return static_cast<const AligningAllocator*>(this)->allocate(n); }
  c10::DeleterFnPtr raw_deleter() const { return &FreeAligned; }
  void copy_data(void* dest, const void* src, std::size_t count) const { std::memcpy(dest, src, count); }
};

}  // namespace

c10::Allocator* AligningCpuAllocator() {
  static AligningAllocator* allocator = new AligningAllocator();  // never destroyed: blocks may outlive main
  return allocator;
}

void KeepFreedMemoryAligned() {
  KeepFreedMemory();
  // Under a sanitizer its own allocator serves every block, not glibc's
  // arena (and the ASan build keeps its cache, tools/sanitizers/
  // asan_cpu_cache.cpp): nothing to mend. Nor over any allocator but
  // LibTorch's own.
  if (kUnderSanitizer || c10::GetAllocator(c10::DeviceType::CPU) != c10::GetDefaultCPUAllocator()) return;
  // Above LibTorch's own (0), below the memory meter's (255), which wraps it.
  c10::SetAllocator(c10::DeviceType::CPU, AligningCpuAllocator(), /*priority=*/1);
}

}  // namespace mp
