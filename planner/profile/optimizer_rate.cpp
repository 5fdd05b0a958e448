#include "planner/profile/optimizer_rate.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <functional>

#include "common/cpu_affinity.h"
#include "common/error.h"
#include "common/worker_pool.h"
#include "executor/optimizer.h"
#include "executor/scoped_threads.h"
#include "planner/profile/device_sync.h"
#include "planner/profile/timer.h"

namespace mp {
namespace {

constexpr int kSlowdownRounds = 11;

OptimizerSettings Defaults(const std::string& name) {
  OptimizerOptions options;
  options.name = name;
  return ResolveOptimizer(options, Plan{});
}

// Bytes written between timed steps on CPU: more than a core's caches
// hold, so a step starts as mpexec's does, after a pipeline step has moved
// other data through them. Repeated back to back, a small model's
// parameters, gradients and state stayed cached: the probe read the zoo
// GPT's sgd at 0.31 ms where mpexec's steps took 0.46, and the ConvNet's
// adam at 0.16 against 0.29.
constexpr int64_t kEvictBytes = int64_t(64) << 20;

// Median ms of `steps` calls of `work` between syncs, `evict` before each.
double MedianMs(const std::function<void()>& work, const std::function<void()>& sync, int steps,
                const std::function<void()>& evict) {
  std::vector<double> samples;
  for (int k = 0; k < steps; ++k) {
    evict();
    samples.push_back(SyncedMs(work, sync));
  }
  return Quantile(samples, 0.5);
}

// `params` cut into `parts` runs of about equal bytes, in order.
std::vector<std::vector<size_t>> Shares(const std::vector<at::Tensor>& params, int parts) {
  double total = 0;
  for (const at::Tensor& p : params) total += double(p.nbytes());
  std::vector<std::vector<size_t>> shares(parts);
  double before = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const int share = std::min(parts - 1, int(parts * (before + double(params[i].nbytes()) / 2) / total));
    shares[share].push_back(i);
    before += double(params[i].nbytes());
  }
  return shares;
}

}  // namespace

OptimizerRates MeasureOptimizerRates(const std::vector<at::Tensor>& params, c10::Device device, int steps,
                                     int workers, int threads) {
  if (steps < 1) throw InternalError(Concat("optimizer probe: ", steps, " steps"));
  std::vector<at::Tensor> copies;
  double bytes = 0;
  {
    at::NoGradGuard no_grad;
    for (const at::Tensor& p : params) {
      if (!p.requires_grad() || !at::isFloatingType(p.scalar_type())) continue;
      at::Tensor copy = p.detach().to(device, /*non_blocking=*/false, /*copy=*/true);
      copy.mutable_grad() = at::randn_like(copy).mul_(1e-3);
      bytes += double(copy.nbytes());
      copies.push_back(std::move(copy));
    }
  }
  OptimizerRates rates;
  if (copies.empty()) return rates;
  const auto sync = DeviceSync(device);
  at::Tensor scratch;
  if (device.is_cpu()) scratch = at::empty({kEvictBytes / 4}, at::kFloat);
  const auto evict = [&] {
    if (scratch.defined()) scratch.fill_(1);
  };
  for (const char* name : {"sgd", "momentum", "adam", "adamw"}) {
    Optimizer optimizer(copies.size(), Defaults(name));
    const auto step = [&] { optimizer.Step(copies); };
    step();  // its state: allocated once, as in a run's first step
    rates.ms_per_mib[name] = MedianMs(step, sync, steps, evict) * double(1 << 20) / bytes;
  }
  if (!device.is_cpu() || workers < 2) return rates;
  // k workers each stepping a share at once, against the slowest share alone.
  Optimizer optimizer(copies.size(), Defaults("adam"));
  const auto step_share = [&](const std::vector<size_t>& share) {  // as mpexec steps a device's
    std::vector<at::Tensor> tensors;
    for (size_t i : share) tensors.push_back(copies[i]);
    optimizer.Step(share, tensors);
  };
  optimizer.Step(copies);  // its state, as above
  WorkerPool pool;
  rates.slowdown.push_back(1);
  for (int k = 2; k <= workers; ++k) {
    const auto shares = Shares(copies, k);
    // The slowest worker's own time, as mpexec times each device's step:
    // waking the pool is the step's fixed cost (step_overhead.h), which
    // made the ConvNet's 0.1 ms steps read 2.4x slower together.
    std::vector<double> each(k);
    const auto together = [&] {
      std::vector<std::function<void()>> jobs;
      for (int w = 0; w < k; ++w) {
        jobs.push_back([&, w] {
          const ScopedPin pin(WorkerCpus(w, k, threads));
          UseThreads(threads);
          each[w] = SyncedMs([&] { step_share(shares[w]); }, sync);
        });
      }
      pool.RunAll(std::move(jobs));
      return *std::max_element(each.begin(), each.end());
    };
    // In turns, so a slow stretch of the machine falls on both sides.
    std::vector<double> alone, at_once;
    for (int round = 0; round < kSlowdownRounds; ++round) {
      double slowest = 0;
      for (const auto& share : shares) {
        evict();
        slowest = std::max(slowest, SyncedMs([&] { step_share(share); }, sync));
      }
      alone.push_back(slowest);
      evict();
      at_once.push_back(together());
    }
    const double a = Quantile(alone, 0.5), t = Quantile(at_once, 0.5);
    rates.slowdown.push_back(a > 0 ? std::max(1.0, t / a) : 1.0);
  }
  return rates;
}

}  // namespace mp
