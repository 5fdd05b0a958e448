#include "planner/profile/allreduce_after_step.h"

#include <algorithm>
#include <array>
#include <memory>

#include "common/cpu_affinity.h"
#include "common/error.h"
#include "common/sanitizer_build.h"
#include "common/worker_pool.h"
#include "planner/graph/run_graph.h"
#include "planner/profile/whole_graph.h"

namespace mp {
namespace {

constexpr int kStepWarmup = 2;
constexpr int kMinStepRounds = 4;
// A small model's sums over about a second: its slow and fast stretches
// last hundreds of milliseconds. Under a sanitizer the figures mean
// nothing and every byte summed is checked: the fewest.
constexpr int kMaxStepRounds = kUnderSanitizer ? kMinStepRounds : 100;
constexpr double kStepBudgetMs = 2000;  // of steps, per rank

}  // namespace

Profile::AllReduceAfterStep MeasureAllReduceAfterStep(const CanonicalGraph& canonical,
                                                      const std::vector<TensorSpec>& inputs, const Profile& profile,
                                                      const AllReduceProbe& probe) {
  if (!profile.training || profile.microbatch_sizes.empty()) {
    throw InternalError("the all-reduce after a step needs a training profile with its sizes");
  }
  const std::vector<int64_t>& sizes = profile.microbatch_sizes;
  const int64_t m = profile.shared_slowdown_microbatch > 0 ? profile.shared_slowdown_microbatch
                                                           : sizes[sizes.size() / 2];
  // A step's time: the whole graph's at the largest size, scaled by the
  // samples, near enough to size the rounds.
  const double step_ms =
      (profile.whole_forward_ms + profile.whole_backward_ms) * double(m) / double(sizes.back());
  const int timed = std::clamp(int(kStepBudgetMs / std::max(step_ms, 1.0)), kMinStepRounds, kMaxStepRounds);
  PassOptions options;
  options.training = true;
  std::vector<std::unique_ptr<WholeGraph>> graphs;
  for (uint64_t r = 0; r < 2; ++r) {
    graphs.push_back(std::make_unique<WholeGraph>(canonical, SyntheticInputs(WithBatch(inputs, m), r), options));
  }
  if (graphs[0]->Parameters().empty()) return {};  // nothing to sum
  // Rank r's pool starts its thread at its first step, in rank r's
  // process: the probe forks rank 1 before it (link_probe.h).
  std::array<WorkerPool, 2> pools;
  const RankStep step = [&](int rank) {
    WholeGraph& graph = *graphs.at(rank);
    pools[rank].RunAll({[&] {
      // On the rank's cores where pinning is on, as mpexec's rank computes.
      const ScopedPin pin(RankCpus(rank, 2));
      // Into the gradients as the probe left them: zeroed where the last
      // sum kept them, else none, as mpexec's step finds them.
      graph.Forward();
      graph.Backward();
    }});
    return graph.Parameters();
  };
  Profile::AllReduceAfterStep result = probe(step, kStepWarmup, timed);
  result.microbatch = m;
  return result;
}

}  // namespace mp
