// Timing for the planner-speed benchmarks: planning is deterministic, so
// the fastest of a few runs is the figure with the least noise in it.
#pragma once

#include <algorithm>
#include <chrono>

namespace mp::bench {

// The fastest of `repeats` runs of `work`, in milliseconds.
template <typename F>
double BestOfMs(int repeats, F&& work) {
  double best = 1e300;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    work();
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

}  // namespace mp::bench
