// CPU memory that behaves like a caching allocator while we time things.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mp {

// Makes glibc keep freed memory in the process instead of returning it to
// the OS: no mmap for large blocks, no trimming of the heap. Without this,
// every large tensor (above glibc's 32 MiB mmap ceiling) is a fresh mapping
// whose pages fault in on first touch, so its cost depends on what was
// freed before it, and a node timed alone costs up to twice its share of a
// whole forward. PyTorch's CUDA caching allocator does the same for GPU
// memory. Call it before threads start allocating (first thing in main);
// idempotent; a no-op on other C libraries. Where jemalloc serves malloc
// (JemallocServes) it also sets jemalloc's decay to never (freed pages stay
// mapped), and glibc's heap is the kept heap large tensor blocks come from
// (KeptHeapAlloc).
void KeepFreedMemory();

// A block from glibc's heap, which KeepFreedMemory keeps, whoever serves
// malloc (glibc's own __libc_malloc; malloc itself on another C library or
// under a sanitizer). LibTorch's large CPU blocks come from here where
// jemalloc serves malloc (aligning_allocator.h): jemalloc kept freed blocks
// of 64 KiB to 1 MiB without reusing them, and a GPipe plan's heap grew
// every step. Freed with KeptHeapFree only.
void* KeptHeapAlloc(size_t bytes);
void KeptHeapFree(void* block);

// Whether jemalloc serves this process's malloc: mpplan and mpexec are
// linked with it where the build found it (CMake's MP_JEMALLOC), or it was
// LD_PRELOADed. False where the C library's malloc does (glibc, or a
// sanitizer's).
bool JemallocServes();

// Whose malloc serves this process, as mpexec reports its heap figures:
// "jemalloc", "glibc", "sanitizer" (the build's ASan or TSan), or "libc"
// (another C library's).
const char* HeapAllocatorName();

// Bytes the C heap has handed out and not yet had back (glibc's mallinfo2;
// where jemalloc serves malloc, its stats.allocated, which counts what its
// threads' caches hold too, plus glibc's kept heap's), which is where every
// CPU tensor lives; -1 where it cannot tell. One number for the whole
// process: CPU workers share one device.
int64_t HeapBytesInUse();

// Bytes the C heap holds from the OS, in use or free (glibc's mallinfo2
// arena and mmapped blocks; with jemalloc, its stats.resident plus those);
// -1 where it cannot tell.
int64_t HeapBytesHeld();

// The process's resident memory at its highest so far, in bytes
// (getrusage's ru_maxrss): what the heap held from the OS, whatever it had
// handed out; -1 where it cannot tell.
int64_t PeakResidentBytes();

// Allocates `bytes`, writes each of its pages and frees it: after
// KeepFreedMemory the heap then keeps that much more memory whose pages
// are already mapped, so the next allocations that outgrow its free blocks
// take no page faults. Without KeepFreedMemory it costs the writes and
// leaves nothing behind.
void PrefaultHeap(int64_t bytes);

}  // namespace mp
