// DriftProbe: the drift reference timed around the steps, on the plan's
// device, with the thread count the profile used, and where CPU workers'
// threads fit the cores, on each worker's block of cores (the blocks the
// pipeline pins its workers to, for its thread count) in turn (pinned
// there for the sample); the median of its samples over the profiled time
// is the machine's drift factor (worker 0's block first), and per block,
// each worker's cores'.
#include "executor/drift.h"

#include <c10/core/Device.h>
#include <torch/cuda.h>

#include <algorithm>

#include "common/cpu_affinity.h"
#include "executor/pipeline.h"
#include "executor/scoped_threads.h"
#include "planner/profile/timer.h"

namespace mp {

DriftProbe::DriftProbe(const Plan& plan, int threads_per_worker, bool other_processes) : plan_(plan) {
  if (plan.profile.source != "measured" || !(plan.profile.reference_ms > 0)) return;
  c10::Device device(c10::kCPU);
  try {
    device = c10::Device(plan.profile.device);
  } catch (const c10::Error&) {
    return;
  }
  if (device.is_cuda() && (!torch::cuda::is_available() || device.index() >= int(torch::cuda::device_count())))
    return;
  reference_ = std::make_unique<DriftReference>(device);
  // A device's reference runs on the device, with no CPU threads to set.
  reference_threads_ = device.is_cpu() ? plan.profile.threads : 0;
  between_steps_ = !device.is_cpu() || (plan.profile.threads == 1 && threads_per_worker == 1 && !other_processes);
  // Per worker only where the reference's threads (the profile's) fit a
  // worker's block: 2 of them pinned to a 1-thread worker's one core read
  // 100x the profile's time (an MLP plan profiled with 2, run with 1).
  if (device.is_cpu() && plan.profile.threads <= threads_per_worker) {
    const int workers = PlanWorkers(plan);
    for (int w = 0; w < workers; ++w) {
      // Pinned or not: a worker's block of cores is where a pinned one runs
      // (laid out for the pipeline's threads), and a slow one shows either way.
      std::vector<int> cpus = WorkerCpus(AllowedCpus(), w, workers, threads_per_worker);
      if (cpus.empty()) break;
      worker_cpus_.push_back(std::move(cpus));
    }
    if (worker_cpus_.size() != size_t(workers)) worker_cpus_.clear();
  }
  samples_.resize(std::max<size_t>(1, worker_cpus_.size()));
}

DriftProbe::~DriftProbe() = default;

void DriftProbe::Sample(int samples) {
  if (!reference_) return;
  const auto sample = [&] {
    for (int i = 0; i < samples; ++i) {
      if (worker_cpus_.empty()) {
        samples_[0].push_back(reference_->TimeMs());
        continue;
      }
      for (size_t w = 0; w < worker_cpus_.size(); ++w) {
        const ScopedPin pin(worker_cpus_[w]);
        samples_[w].push_back(reference_->TimeMs());
      }
    }
  };
  // With more than one thread, on a thread that takes its OpenMP team with
  // it (RunOnOwnThread); one thread makes none, and samples between steps
  // (between_steps_) start no thread.
  if (reference_threads_ > 1) {
    RunOnOwnThread(reference_threads_, sample);
  } else {
    const ScopedThreads profiled(reference_threads_);
    sample();
  }
}

void DriftProbe::AfterStep() {
  if (between_steps_) Sample();
}

Drift DriftProbe::Result() const {
  Drift drift;
  if (samples_.empty() || samples_[0].empty()) return drift;
  drift.now_ms = Quantile(samples_[0], 0.5);
  drift.samples = int(samples_[0].size());
  drift.factor = drift.now_ms / plan_.profile.reference_ms;
  drift.measured = true;
  if (!worker_cpus_.empty()) {
    for (const auto& samples : samples_) {
      drift.worker_factors.push_back(Quantile(samples, 0.5) / plan_.profile.reference_ms);
    }
    drift.worker_cpus = worker_cpus_;
  }
  return drift;
}

}  // namespace mp
