// The all-reduce after a training step, measured on the model itself: two
// copies of the whole graph, one per rank (two processes, as mpexec's
// replicas run), each running a training step at
// a micro-batch size before every round on a pool thread (as mpexec's
// stage worker does), then the rank's own thread summing the gradients
// over the two with mpexec's own code (Profile::allreduce_after_step;
// executor/gradient_sum.h). The link probe's all-reduce (executor/
// link_probe.h) spins 1 ms before each round; a step leaves the
// sum slower than that: in mpexec the GPT's 7.4 MB read 27-32% over the
// probe's line in four sessions, the MLP's 16.8 MB 8-37% (docs/profile.md).
// The profiler runs the steps; the executor's probe (passed in: the
// profiler does not reach the executor) times the sums.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <vector>

#include "planner/graph/canonical_graph.h"
#include "planner/graph/input_spec.h"
#include "planner/profile/profile.h"

namespace mp {

// A rank's training step: its parameters, their .grad() filled (which the
// probe's sum replaces with views of the summed buffer, as mpexec's does).
using RankStep = std::function<std::vector<at::Tensor>(int rank)>;
// Runs `step` on two ranks before each of warmup + timed sums of the
// gradients it leaves; returns the bytes summed, the ms a sum took, and
// the ranks' gap and round (Profile::AllReduceAfterStep; its microbatch
// the caller's).
using AllReduceProbe = std::function<Profile::AllReduceAfterStep(const RankStep& step, int warmup, int timed)>;

// At the contention probe's micro-batch size (a replica's micro-batch is
// a share of the batch), on CPU, with rounds for about two seconds of
// steps (4 to 10 timed, 2 warm-up). `profile`: measured in training, its
// sizes and whole-graph times known. Not measured (zeros) for a model
// with no parameter to train.
Profile::AllReduceAfterStep MeasureAllReduceAfterStep(const CanonicalGraph& canonical,
                                                      const std::vector<TensorSpec>& inputs, const Profile& profile,
                                                      const AllReduceProbe& probe);

}  // namespace mp
