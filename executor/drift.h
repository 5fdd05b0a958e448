// How fast the machine is now against when the plan's profile was taken:
// the drift reference (planner/profile/drift_reference.h) timed again
// between the steps mpexec runs, on the profile's device with its thread
// count. mpexec scales the plan's predictions by the ratio of the medians,
// so a profile taken in a slow stretch of a shared machine is not read as
// a slow plan. Samples between the steps, not in a row before them: a slow
// stretch of this machine lasts about as long as a row of samples would.
// On CPU workers, though, only where the stages and the reference run one
// thread each. With more, a sample after a step found the stage's OpenMP
// team still spinning on the cores and read 2-3.7x the profile's time (a
// one-stage MLP plan of 2 threads); and a reference of another thread
// count than the stages' set the calling thread's and set it back, which
// the next step's first forward paid for (UseThreads, scoped_threads.h:
// 2-4x the later ones). There the samples are the row before the steps,
// when no stage has run. Nor over processes on CPU: a sample between two
// steps of one rank (pinned to each worker's cores in turn, another
// rank's among them) ran while the other ranks began their next step, and
// their stage threads waited for a core: over 2 replicas of the ConvNet,
// 12 of 44 stage threads woke over 0.5 ms late (0.3 ms on average) with
// it, 0 and 1 of 44 (0.04 and 0.13 ms) without.
#pragma once

#include <memory>
#include <vector>

#include "planner/plan/plan.h"
#include "planner/profile/drift_reference.h"

namespace mp {

struct Drift {
  double factor = 1;      // now / when profiled; 1 when not measured
  double now_ms = 0;      // the reference's median now
  int samples = 0;        // the reference's samples (the first worker's), of which now_ms is the median
  bool measured = false;  // false: the plan has no reference (a device profile's
                          // estimates), or its device is not here
  // Where the CPU workers' threads fit the cores (common/cpu_affinity.h):
  // the reference on each worker's block of cores now over the profile's,
  // in worker order (replica r's device d is worker r * devices + d);
  // factor is the first. The workers run there when pinned (MP_PIN_CPUS=1);
  // either way a slow core shows. Empty when they do not fit, or the
  // reference's threads (the profile's) do not fit a worker's block. The
  // cores of one machine need not run alike, nor keep their speeds: on this
  // project's VM the faster of two vCPUs changed every few seconds to
  // minutes.
  std::vector<double> worker_factors;
  std::vector<std::vector<int>> worker_cpus;  // the blocks, in the same order
};

class DriftProbe {
 public:
  // threads_per_worker: the pipeline's (ThreadsPerStage), which lays out
  // the workers' blocks of cores; the reference runs with the profile's.
  // `other_processes`: ranks of other processes run stages of this plan
  // beside this one; on CPU none is sampled between the steps then.
  DriftProbe(const Plan& plan, int threads_per_worker, bool other_processes = false);
  ~DriftProbe();
  // Times the reference `samples` times (on each CPU worker's block of
  // cores where they fit); nothing when the plan has none.
  void Sample(int samples = 1);
  // After each step: one sample, on a device, or where the stages and the
  // reference run one thread each (above); else nothing.
  void AfterStep();
  Drift Result() const;

 private:
  const Plan& plan_;
  bool between_steps_ = false;  // samples after each step too
  int reference_threads_ = 0;   // a sample's intra-op threads (0: as it is; over 1: on a thread of its own)
  std::unique_ptr<DriftReference> reference_;
  std::vector<std::vector<int>> worker_cpus_;  // empty: the workers' threads do not fit the cores
  std::vector<std::vector<double>> samples_;   // [worker] (one list without worker_cpus_)
};

}  // namespace mp
