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

void FreeAligned(void* data) {
  if (data == nullptr) return;
  auto* block = static_cast<unsigned char*>(data);
  std::free(block - block[-1]);
}

// Both allocate signatures and copy_data without `override`: LibTorch 1.13
// declares allocate const and has no copy_data; 2.3 and later declare
// allocate non-const and copy_data pure. Each build overrides its own.
class AligningAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) const {
    const c10::Device cpu(c10::DeviceType::CPU);
    if (n == 0) return {nullptr, nullptr, &FreeAligned, cpu};
    auto* raw = static_cast<unsigned char*>(std::malloc(n + kAlignment));
    if (raw == nullptr) throw std::bad_alloc();
    // 1 to 64 bytes in: the byte before the block says how many.
    const std::uintptr_t at = (reinterpret_cast<std::uintptr_t>(raw) + kAlignment) & ~(kAlignment - 1);
    auto* block = reinterpret_cast<unsigned char*>(at);
    block[-1] = static_cast<unsigned char>(block - raw);
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
  // asan_cpu_cache.cpp), and jemalloc gives an aligned request a freed
  // block of its size: nothing to mend. Nor over any allocator but
  // LibTorch's own.
  if (kUnderSanitizer || JemallocServes() || c10::GetAllocator(c10::DeviceType::CPU) != c10::GetDefaultCPUAllocator()) return;
  // Above LibTorch's own (0), below the memory meter's (255), which wraps it.
  c10::SetAllocator(c10::DeviceType::CPU, AligningCpuAllocator(), /*priority=*/1);
}

}  // namespace mp
