// bench_exec's `threads` section: does a step's first forward cost what
// the later ones do, with the profile's intra-op thread count and with
// another? mpexec set the count at every step (each worker, and the calling
// thread around the step and around each drift sample), and
// at::set_num_threads rebuilds LibTorch's thread pool and clears oneDNN's
// kernel cache, so every step's first forward paid 2-4x the later ones'
// (executor/scoped_threads.h). And what mpexec's drift reference reads
// there (executor/drift.h).
#pragma once

#include <string>

namespace mp::bench {

// The zoo MLP at 1 stage x 8 micro-batches, its profile timed with 2
// threads a stage, run by `mpexec --trace` with 2 threads a stage and with
// 1 (--threads-per-stage), in turns. For each run's median step: its first
// forward against the median of its later ones, and the wait from the
// step's start to its first action, and the drift factor mpexec reported
// (no target: the machine's speed against the profile's, which read 2-3.7x
// and 100x where the reference ran beside a stage's spinning threads or
// pinned to too few cores). Prints a line per run and the verdict;
// true when, for each thread count, the median run's first forward is
// within 25% of its later ones and its wait under 1 ms.
bool ThreadCounts(const std::string& mpplan, const std::string& mpexec, const std::string& models,
                  const std::string& out, bool quick);

}  // namespace mp::bench
