// The contention probe: how much slower the model runs when k copies of it
// run at once on this machine, as k CPU-worker stages do. The per-node
// profile is taken with one node running on an idle machine; CPU workers
// share the memory bus, the last-level cache and the allocator's lock, and
// with more workers than cores, the cores themselves. The probe measures
// that once per model instead of guessing it, and the simulator slows an
// action by slowdown[k - 1] while k stages compute at once.
//
// On a shared virtual machine the second core is not always all there: for
// tens of milliseconds at a time, two copies at once ran 1.75x slower where
// a minute later they ran 1.03x slower. One block of turns (80 ms for the
// ConvNet) caught either, and the plan inherited it (a 2-stage ConvNet plan
// predicted 13.4 ms, measured 9.4). So the probe's turns are spread over
// the whole profile, between its passes, and each turn is a paired ratio.
//
// The copies run as threads of this process, as a pipeline's stages run in
// mpexec, or as processes, as its data-parallel replicas do (copies.h):
// the planner charges a plan with replicas the processes' factor.
#pragma once

#include <torch/script.h>

#include <chrono>
#include <memory>
#include <vector>

#include "planner/graph/canonical_graph.h"
#include "planner/profile/band.h"
#include "planner/profile/copies.h"
#include "planner/profile/node_by_node.h"

namespace mp {

struct SharedSlowdown {
  std::vector<double> factors;  // [k - 1]: at least 1; factors[0] = 1
  // Pinned workers only (MP_PIN_CPUS=1, cpu_affinity.h): [w] = worker w's
  // time alone on its own cores over worker 0's alone on its cores, the
  // median over the turns; speeds[0] = 1. Empty when not pinned.
  std::vector<double> speeds;
  // The turns' ratios, each over the median of its k, pooled over k
  // (SampleBand): how much one turn's ratio strays from the factor.
  Band band;
  int turns = 0;
};

class SharedSlowdownProbe {
 public:
  // Copies of the whole graph (forward, and backward in training) on
  // `model_inputs`, one per worker, each run by a thread of its own with
  // `threads` intra-op threads, or with `processes` by a child process of
  // its own (process_copies.h); the threads or processes live as long as
  // the probe. `share`: the fraction of the time since it was built that
  // MaybeTurn may spend.
  SharedSlowdownProbe(const CanonicalGraph& canonical, const std::vector<c10::IValue>& model_inputs,
                      const PassOptions& options, int workers, int threads, double share, bool processes = false);
  ~SharedSlowdownProbe();
  SharedSlowdownProbe(const SharedSlowdownProbe&) = delete;
  SharedSlowdownProbe& operator=(const SharedSlowdownProbe&) = delete;

  // One turn: the graph alone after an untimed run of it (and, pinned,
  // alone on each other worker's cores), then k copies at once for each
  // k = 2..workers, copy i starting i/k of the time alone after the first;
  // a copy's sample is its first run to start once all have started, and
  // every copy keeps running until each has its sample, so every sample
  // saw k at work.
  void Turn();
  // A turn if the probe has spent under its share of the time since it was
  // built: called between the profiler's passes, this spreads the turns
  // over the profile at that share of its cost.
  void MaybeTurn();
  // More turns, until at least `min_turns` and (up to 40 in all) the
  // samples span 0.4 s. Returns factors[k - 1] = the median over the turns
  // of (median time of the k copies / time alone in the same turn), at
  // least 1, the pinned workers' speeds, and the band of the turns' ratios
  // (slowdowns and speeds).
  SharedSlowdown Finish(int min_turns);
  int Turns() const { return turns_; }

 private:
  std::unique_ptr<Copies> copies_;
  int count_;
  bool pinned_ = false;  // each worker on cores of its own (WorkerCpus)
  double share_;
  std::vector<std::vector<double>> ratios_;        // [k - 1][turn]
  std::vector<std::vector<double>> speed_ratios_;  // [w][turn]
  double spent_ms_ = 0;
  int turns_ = 0;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace mp
