// Sample-based timing with adaptive inner repetition: work shorter than
// min_sample_ms is repeated inside one sample (as Python's timeit
// autorange does), so sub-microsecond nodes are not lost in clock noise,
// while long work is run exactly `repeats` times.
#include "planner/profile/timer.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#if defined(__linux__)
#include <sys/resource.h>
#endif

namespace mp {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

double Quantile(std::vector<double> samples, double q) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const double pos = q * double(samples.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, samples.size() - 1);
  return samples[lo] + (pos - double(lo)) * (samples[hi] - samples[lo]);
}

double MiddleMean(std::vector<double> samples) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const size_t cut = samples.size() / 10;
  double sum = 0;
  for (size_t i = cut; i < samples.size() - cut; ++i) sum += samples[i];
  return sum / double(samples.size() - 2 * cut);
}

int64_t ThreadMinorFaults() {
#if defined(__linux__)
  struct rusage usage {};
  if (getrusage(RUSAGE_THREAD, &usage) == 0) return int64_t(usage.ru_minflt);
#endif
  return 0;
}

double UnfaultedMedian(const std::vector<double>& samples, const std::vector<bool>& faulted) {
  std::vector<double> clean;
  for (size_t i = 0; i < samples.size(); ++i)
    if (i >= faulted.size() || !faulted[i]) clean.push_back(samples[i]);
  return Quantile(clean.empty() ? samples : clean, 0.5);
}

Timing TimeWork(const std::function<void()>& work, const TimingOptions& options,
                const std::function<void()>& sync) {
  auto wait = [&] {
    if (sync) sync();
  };
  auto timed_run = [&] {
    wait();
    const auto start = Clock::now();
    work();
    wait();
    return MsSince(start);
  };
  // The warm-up also measures one run, to size the samples.
  double first_ms = 0;
  for (int i = 0; i < std::max(1, options.warmup); ++i) first_ms = timed_run();
  Timing timing;
  if (first_ms < options.min_sample_ms)
    timing.runs_per_sample = static_cast<int>(
        std::min(1000.0, std::ceil(options.min_sample_ms / std::max(first_ms, 1e-5))));
  std::vector<double> samples;
  for (int r = 0; r < std::max(1, options.repeats); ++r) {
    wait();
    const auto start = Clock::now();
    for (int i = 0; i < timing.runs_per_sample; ++i) work();
    wait();
    samples.push_back(MsSince(start) / timing.runs_per_sample);
  }
  timing.median_ms = Quantile(samples, 0.5);
  timing.p10_ms = Quantile(samples, 0.1);
  timing.p90_ms = Quantile(samples, 0.9);
  return timing;
}

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

void Spin(std::chrono::microseconds how_long) {
  const auto until = std::chrono::steady_clock::now() + how_long;
  while (std::chrono::steady_clock::now() < until) {
  }
}

}  // namespace mp
