// Timing a piece of work the way benchmarks should: warm-up runs that are
// discarded, then several samples, each long enough for the clock, and the
// median with its spread. Device work is synchronised around each sample.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

namespace mp {

struct TimingOptions {
  int warmup = 1;             // runs before the first sample, not recorded
  int repeats = 5;            // samples; the result is their median
  double min_sample_ms = 0.02;  // a sample repeats the work until it lasts this long
};

struct Timing {
  double median_ms = 0;       // per run of the work
  double p10_ms = 0;
  double p90_ms = 0;
  int runs_per_sample = 1;

  // (p90 - p10) / median: 0 for perfectly steady work.
  double Spread() const { return median_ms > 0 ? (p90_ms - p10_ms) / median_ms : 0; }
};

// Runs `work` max(1, warmup) + repeats * runs_per_sample times. `sync`
// waits for queued device work (empty on CPU); it runs before the clock
// starts and before it stops, so asynchronous launches are never timed
// alone.
Timing TimeWork(const std::function<void()>& work, const TimingOptions& options,
                const std::function<void()>& sync = {});

// Milliseconds on the steady clock since `start`.
double MsSince(std::chrono::steady_clock::time_point start);

// Keeps the calling thread's core busy for `how_long` (no sleep): a thread
// at work, as a stage computing on or mpexec's step set-up.
void Spin(std::chrono::microseconds how_long);

// Quantile q in [0, 1] of `samples` by linear interpolation (sorts a copy).
double Quantile(std::vector<double> samples, double q);

// The mean of the middle 80% of `samples` (sorts a copy; all of them where
// fewer than 10): what a step pays on average for a cost that a wait for a
// core comes to in some steps and not others, without the rare stall. The
// median of such a cost jumps between its modes: a 248 KB all-reduce on
// this project's 2-core VM takes 0.5-1 ms or 3-6, in shares that vary from
// run to run.
double MiddleMean(std::vector<double> samples);

// Minor page faults the calling thread has taken so far, each a first
// touch of a fresh page (Linux's RUSAGE_THREAD; 0 elsewhere). A sample
// that took some paid for memory a steady run has from the step before.
int64_t ThreadMinorFaults();

// The median of the samples that took no fresh pages (`faulted` false),
// or of all of them where every one did.
double UnfaultedMedian(const std::vector<double>& samples, const std::vector<bool>& faulted);

}  // namespace mp
