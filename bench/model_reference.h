// The host's speed on a model's own work, for judging a prediction made a
// minute before the run: the model's whole graph (WholeGraph, the profile's
// coverage reference) forward and backward at one micro-batch size, on the
// calling thread, pinned to each allowed core in turn. Timed when the
// profile is taken and again beside the plans' steps, the ratio says how
// much slower or faster this machine runs that model now; mpexec's drift
// reference (a cache-resident 0.15 ms kernel, planner/profile/
// drift_reference.h) moved 1.0-1.2x through a stretch that slowed these
// models 1.2-1.35x, and read 1.1-1.15x in minutes that did not slow them
// (docs/BENCHMARKS.md). Neither reference is in the plan: the ratio is
// measured here, apart from the profile's numbers, so it carries the
// machine's speed and none of the prediction's error.
#pragma once

#include <torch/script.h>

#include <cstdint>
#include <vector>

#include "planner/graph/canonical_graph.h"
#include "planner/graph/input_spec.h"
#include "planner/profile/whole_graph.h"

namespace mp::bench {

class ModelReference {
 public:
  // `canonical` in training mode, its parameters not shared with a pipeline
  // that runs meanwhile (the samples drop the gradients they make);
  // `full_batch`: the model's input spec, cut here to `size` samples.
  ModelReference(const CanonicalGraph& canonical, const std::vector<TensorSpec>& full_batch, int64_t size);
  // One forward and backward on the next allowed core, kept with that
  // core's samples.
  void Sample();
  // The samples since the last Take(), their median for each allowed core
  // (in AllowedCpus() order; 0 where none); clears them.
  std::vector<double> Take();

 private:
  WholeGraph whole_;
  size_t next_core_ = 0;
  std::vector<std::vector<double>> samples_;  // [core]
};

// The host now against when profiled: the cores' mean of the reference's
// per-core medians now over their mean then (a profile's thread and a
// pipeline's move between the cores). 1 when either has none. Taken against
// the slower core instead, 40 and 26 of 46 plans came within 10% where
// the mean gave 39 and 35 (docs/BENCHMARKS.md).
double HostFactor(const std::vector<double>& profiled, const std::vector<double>& now);

}  // namespace mp::bench
