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
// (forty-seventh session).
#include "common/allocator.h"

#include <unistd.h>

#include <cstdlib>  // defines __GLIBC__ on glibc

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace mp {

void KeepFreedMemory() {
#if defined(__GLIBC__)
  mallopt(M_ARENA_MAX, 1);  // a thread's own arena would mmap large blocks anyway
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, -1);  // -1: never trim (mallopt(3))
#endif
}

int64_t HeapBytesInUse() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  const struct mallinfo2 info = mallinfo2();
  return static_cast<int64_t>(info.uordblks + info.hblkhd);  // heap chunks in use + mmapped blocks
#else
  return -1;
#endif
}

int64_t HeapBytesHeld() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  const struct mallinfo2 info = mallinfo2();
  return static_cast<int64_t>(info.arena + info.hblkhd);  // the heap, in use or free + mmapped blocks
#else
  return -1;
#endif
}

void PrefaultHeap(int64_t bytes) {
  if (bytes <= 0) return;
  char* block = static_cast<char*>(std::malloc(static_cast<size_t>(bytes)));
  if (block == nullptr) return;
  volatile char* touch = block;  // volatile: the writes (and so the block) are not optimised away
  const long size = sysconf(_SC_PAGESIZE);
  const int64_t page = size > 0 ? size : 4096;
  for (int64_t i = 0; i < bytes; i += page) touch[i] = 0;
  std::free(block);
}

}  // namespace mp
