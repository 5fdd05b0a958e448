#include "planner/profile/step_overhead.h"

#include <chrono>
#include <functional>

#include "common/cpu_affinity.h"
#include "common/error.h"
#include "common/worker_pool.h"
#include "executor/scoped_threads.h"
#include "planner/profile/timer.h"

namespace mp {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kWarmupSteps = 5;
constexpr std::chrono::microseconds kBetweenSteps{1000};

}  // namespace

std::vector<double> MeasureStepOverheadMs(int workers, int threads, int steps) {
  if (workers < 1 || steps < 1) throw InternalError(Concat("step probe: ", workers, " workers, ", steps, " steps"));
  std::vector<double> overhead;
  WorkerPool pool;
  for (int k = 1; k <= workers; ++k) {
    std::vector<double> samples;
    for (int step = 0; step < kWarmupSteps + steps; ++step) {
      std::vector<std::function<void()>> jobs;
      for (int w = 0; w < k; ++w) {
        jobs.push_back([w, k, threads] {
          const ScopedPin pin(WorkerCpus(w, k, threads));
          // As mpexec's workers: set every step, the count rebuilt
          // LibTorch's pool and read 6 ms a step with 2 threads against
          // 0.07 with 1.
          UseThreads(threads);
        });
      }
      const Clock::time_point start = Clock::now();
      pool.RunAll(std::move(jobs));
      if (step >= kWarmupSteps) samples.push_back(MsSince(start));
      Spin(kBetweenSteps);
    }
    overhead.push_back(Quantile(samples, 0.5));
  }
  return overhead;
}

}  // namespace mp
