#include "bench/model_reference.h"

#include "bench/median.h"
#include "common/cpu_affinity.h"
#include "planner/graph/run_graph.h"
#include "planner/profile/pass_options.h"

namespace mp::bench {
namespace {

PassOptions Training() {
  PassOptions options;
  options.training = true;
  return options;
}

}  // namespace

ModelReference::ModelReference(const CanonicalGraph& canonical, const std::vector<TensorSpec>& full_batch,
                               int64_t size)
    : whole_(canonical, SyntheticInputs(WithBatch(full_batch, size)), Training()) {
  whole_.ForgetGradients();
}

void ModelReference::Sample() {
  const std::vector<int>& cpus = AllowedCpus();
  const size_t core = next_core_++ % cpus.size();
  const ScopedPin pin({cpus[core]});
  // Once untimed first, as the drift reference does: a sample taken just
  // after mpplan's process ran found the model's weights out of cache (the
  // MLP's whole graph at 128 read 0.84x after the profile against the
  // rounds), and the reference is to read the machine, not the cache.
  whole_.Forward();
  whole_.Backward();
  whole_.ForgetGradients();
  const double ms = whole_.Forward() + whole_.Backward();
  whole_.ForgetGradients();
  samples_.resize(cpus.size());
  samples_[core].push_back(ms);
}

std::vector<double> ModelReference::Take() {
  std::vector<double> medians(AllowedCpus().size(), 0);
  for (size_t core = 0; core < samples_.size(); ++core) medians[core] = Median(samples_[core]);
  samples_.clear();
  return medians;
}

double HostFactor(const std::vector<double>& profiled, const std::vector<double>& now) {
  const auto mean = [](const std::vector<double>& medians) {
    double sum = 0;
    int count = 0;
    for (double ms : medians)
      if (ms > 0) sum += ms, count += 1;
    return count ? sum / count : 0;
  };
  const double then_ms = mean(profiled), now_ms = mean(now);
  return then_ms > 0 && now_ms > 0 ? now_ms / then_ms : 1;
}

}  // namespace mp::bench
