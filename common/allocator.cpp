// KeepFreedMemory through mallopt: one arena (a thread arena's heap is capped
// at 64 MiB and falls back to mmap), M_MMAP_MAX 0 serves every block from the
// heap, and M_TRIM_THRESHOLD -1 keeps freed memory there.
// Measured on ResNet-50 (batch 120, 128x128, training, 2 cores): coverage
// 2.06 -> 1.04 and profiling wall time 95 s -> 48 s.
// The price of one arena: every thread allocates under its one lock. The
// ConvNet's 2-stage pipeline (threads) at 64 micro-batches of 1 ran 28-46
// ms a step, 17-19 with 8 arenas; the contention probe's threads read 4-5x
// at 1 sample where processes read 1.1x. But with 8 arenas ResNet-50's
// 64-sample micro-batch ran 3.5x slower (its large blocks mmapped afresh
// in the threads' heaps). docs/BENCHMARKS.md, 2026-12-06. With the aligning
// allocator keeping freed blocks of 1 MiB and up for reuse, 8 arenas and
// M_TOP_PAD 64 MiB, it still ran 1.2-1.4x slower, faulting 0.35 million
// more pages a run (not from LibTorch's CPU allocator): not taken
// (forty-seventh session). Nor a cache of freed tensor blocks per thread
// in the aligning allocator (forty-eighth): the threads' factor at 1
// sample 2.0-3.8 in four ConvNet profiles against 2.3-5.6 without, the
// small blocks of LibTorch's own bookkeeping still under the one lock.
//
// Where mpplan and mpexec are linked with jemalloc (CMake's MP_JEMALLOC,
// the default where Debian's libjemalloc-dev is installed), its malloc
// serves the whole process, an arena per few threads and a cache per
// thread, so the stages' threads do not meet at one lock: the ConvNet's
// threads' contention factor read 1.00-1.45 at 1 sample. But not for the
// tensors' large blocks: freed blocks of 64 KiB to 1 MiB that jemalloc
// kept (decay never) were not given to the next requests, and the GPT's
// 2-stage GPipe plan at 8 micro-batches grew by 12 MiB a step (665 MiB
// resident after 30 steps, about 3,000 page faults a step); with its
// default decay it purged them and faulted them in again (its step 20%
// over 1F1B's, level under glibc). Blocks of 64 KiB and up therefore come
// from glibc's kept heap (KeptHeapAlloc, through __libc_malloc), as
// without jemalloc: 305 MiB resident after 4 steps and after 30.
#include "common/allocator.h"

#include <sys/resource.h>
#include <sys/types.h>  // ssize_t
#include <unistd.h>

#include <cstddef>
#include <cstdlib>  // defines __GLIBC__ on glibc
#include <string>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "common/sanitizer_build.h"

// jemalloc's control interface: resolved where jemalloc serves malloc
// (linked, or LD_PRELOADed), null where the C library's does.
extern "C" int mallctl(const char* name, void* oldp, size_t* oldlenp, void* newp, size_t newlen)
    __attribute__((weak));

#if defined(__GLIBC__)
// glibc's own malloc and free, whoever serves malloc (glibc exports them).
extern "C" void* __libc_malloc(size_t bytes);
extern "C" void __libc_free(void* block);
#endif

namespace mp {
namespace {

// A jemalloc statistic after refreshing them (they are a snapshot taken at
// each "epoch"); -1 where it cannot be read.
int64_t JemallocStat(const char* name) {
  uint64_t epoch = 1;
  size_t length = sizeof epoch;
  if (mallctl("epoch", &epoch, &length, &epoch, length) != 0) return -1;
  size_t value = 0;
  length = sizeof value;
  if (mallctl(name, &value, &length, nullptr, 0) != 0) return -1;
  return static_cast<int64_t>(value);
}

}  // namespace

bool JemallocServes() { return mallctl != nullptr; }

const char* HeapAllocatorName() {
  if (kUnderSanitizer) return "sanitizer";
  if (JemallocServes()) return "jemalloc";
#if defined(__GLIBC__)
  return "glibc";
#else
  return "libc";
#endif
}

void KeepFreedMemory() {
  if (JemallocServes()) {
    // Never purge freed pages (the small blocks it serves are reused as
    // they come): for arenas made from now on, and for those there are.
    ssize_t never = -1;
    mallctl("arenas.dirty_decay_ms", nullptr, nullptr, &never, sizeof never);
    mallctl("arenas.muzzy_decay_ms", nullptr, nullptr, &never, sizeof never);
    unsigned arenas = 0;
    size_t length = sizeof arenas;
    if (mallctl("arenas.narenas", &arenas, &length, nullptr, 0) != 0) arenas = 0;
    for (unsigned i = 0; i < arenas; ++i) {  // one not made yet answers EFAULT
      for (const char* kind : {"dirty", "muzzy"}) {
        const std::string key = "arena." + std::to_string(i) + "." + kind + "_decay_ms";
        mallctl(key.c_str(), nullptr, nullptr, &never, sizeof never);
      }
    }
  }
  // glibc's heap: all of malloc's, or (under jemalloc) the kept heap's.
#if defined(__GLIBC__)
  mallopt(M_ARENA_MAX, 1);  // a thread's own arena would mmap large blocks anyway
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, -1);  // -1: never trim (mallopt(3))
#endif
}

void* KeptHeapAlloc(size_t bytes) {
#if defined(__GLIBC__)
  if (!kUnderSanitizer) return __libc_malloc(bytes);
#endif
  return std::malloc(bytes);
}

void KeptHeapFree(void* block) {
#if defined(__GLIBC__)
  if (!kUnderSanitizer) return __libc_free(block);
#endif
  std::free(block);
}

namespace {

// glibc's heap in use and held (mallinfo2); -1 where it cannot tell.
int64_t GlibcHeap(bool held) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  const struct mallinfo2 info = mallinfo2();
  // The heap in use, or the heap in use or free; and mmapped blocks.
  return static_cast<int64_t>((held ? info.arena : info.uordblks) + info.hblkhd);
#else
  (void)held;
  return -1;
#endif
}

// jemalloc's figure plus glibc's kept heap's, or glibc's alone.
int64_t BothHeaps(const char* jemalloc_stat, bool held) {
  const int64_t glibc = GlibcHeap(held);
  if (!JemallocServes()) return glibc;
  const int64_t jemalloc = JemallocStat(jemalloc_stat);
  return jemalloc < 0 || glibc < 0 ? -1 : jemalloc + glibc;
}

}  // namespace

int64_t HeapBytesInUse() { return BothHeaps("stats.allocated", false); }

int64_t HeapBytesHeld() { return BothHeaps("stats.resident", true); }

int64_t PeakResidentBytes() {
  struct rusage usage {};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return -1;
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux counts KiB
}

void PrefaultHeap(int64_t bytes) {
  if (bytes <= 0) return;
  char* block = static_cast<char*>(KeptHeapAlloc(static_cast<size_t>(bytes)));
  if (block == nullptr) return;
  volatile char* touch = block;  // volatile: the writes (and so the block) are not optimised away
  const long size = sysconf(_SC_PAGESIZE);
  const int64_t page = size > 0 ? size : 4096;
  for (int64_t i = 0; i < bytes; i += page) touch[i] = 0;
  KeptHeapFree(block);
}

}  // namespace mp
