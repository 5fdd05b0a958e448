// The measured profile: the canonical graph run node by node on this
// machine at several micro-batch sizes, plus the whole graph in one piece,
// to which each size's node times are scaled (WholeScale).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "planner/graph/canonical_graph.h"
#include "planner/graph/input_spec.h"
#include "planner/profile/profile.h"
#include "planner/profile/timer.h"

namespace mp {

struct MeasureOptions {
  bool training = false;
  std::vector<int64_t> microbatch_sizes;  // empty: DefaultMicrobatchSizes(batch) but Profile::sizes_left_out
  TimingOptions timing;
  std::string device = "cpu";             // cpu, cuda, cuda:1, ...
  bool timed = true;                      // false: shapes, bytes and FLOPs only
  uint64_t seed = 0;
  // Timed: the factor to scale the node times by (pass_scale.h); 0: the
  // profile's own passes set it. Sizes added to a profile take its factor,
  // so that one profile does not mix two.
  double pass_scale = 0;
  // Timed: what timing a node alone adds (Profile::node_overhead); empty:
  // measured here. Sizes added to a profile take its own, as its factor.
  std::vector<double> node_overhead;
  // CPU, timed: also run the contention probe for up to this many workers
  // sharing the machine (Profile::shared_slowdown); 1: do not.
  int workers = 1;
  // With workers: the plan may have data-parallel replicas, which mpexec
  // runs as processes: also run the probe with its copies as processes
  // (Profile::process_slowdown_by_size).
  bool replica_processes = false;
  // Training, timed: also time the optimizer's step (optimizer_rate.h).
  // False for sizes added to a profile: MergeSizes keeps the profile's.
  bool optimizer = true;
  // (steps done, steps in all); a step is one node's forward or backward.
  std::function<void(int64_t, int64_t)> progress;
};

// 1, B^(1/3), B^(2/3) and B, rounded and without repeats: geometric, since
// per-sample cost changes fastest at small micro-batches.
std::vector<int64_t> DefaultMicrobatchSizes(int64_t batch);

// Profiles `canonical` (whose training flag must match options.training)
// for the full-batch input spec `inputs`. Uses the current intra-op
// thread count and records it. Throws InputError for bad sizes or an
// unavailable device.
Profile MeasureProfile(const CanonicalGraph& canonical, const std::vector<TensorSpec>& inputs,
                       const MeasureOptions& options);

}  // namespace mp
