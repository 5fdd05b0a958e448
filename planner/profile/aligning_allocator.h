// The CPU allocator mpplan and mpexec run with: glibc keeping freed memory
// (KeepFreedMemory, common/allocator.h) and LibTorch's CPU tensors
// aligned inside a plain malloc.
#pragma once

#include <c10/core/Allocator.h>

namespace mp {

// LibTorch's own CPU allocator asks glibc for 64-byte-aligned blocks
// (posix_memalign). Under KeepFreedMemory (one arena, no mmap, no trim)
// glibc serves such a request from a free chunk only with room for the
// alignment beyond the size, so a freed block never takes the next request
// of its own size, and a training step's freed gradients were left behind
// while the heap grew: the zoo MLP's mpexec held 1.5 GB after 180 s with
// 113 MB in use, 0.6 MB more each step (docs/BENCHMARKS.md). This one
// takes the alignment from inside a plain malloc of 65 bytes more (the
// offset and the heap it came from kept in the two bytes before the
// block), so a freed block fits the next request of its size. Blocks of 64
// KiB and up come from glibc's kept heap even where jemalloc serves malloc
// (KeptHeapAlloc, common/allocator.h), the smaller from malloc. The memory
// meter (memory_meter.h) wraps it.
c10::Allocator* AligningCpuAllocator();

// KeepFreedMemory, then AligningCpuAllocator as LibTorch's CPU allocator
// (c10::SetAllocator): the second mends what the first's options cause, so
// they come together. First thing in main (mpplan, mpexec, and the benches
// that measure as they do), before LibTorch starts threads and before any
// tensor: a block made by another allocator must not come back through the
// aligning one's raw_deleter. The allocator is not installed under a
// sanitizer (whose allocator is not glibc's) nor over an allocator other
// than LibTorch's own.
void KeepFreedMemoryAligned();

}  // namespace mp
