// The link probe: what a message between stages in two processes of this
// machine, and an all-reduce between two replicas, cost over Gloo on
// loopback, as mpexec pays them (--launch-local, or torchrun on one host).
// Two ranks run as threads of this process on a real Gloo group. A message
// goes the way a boundary's does: the sending worker queues it to a bridge
// thread and computes on (1 ms), the bridge sends it as one WireStream
// transfer, and the peer's bridge receives it while the peer's worker
// computes: in a pipeline both stages are busy as a message goes, so every
// thread the message needs (bridges, the transport's own) waits for a core
// as it does in mpexec. On a 2-core machine that wait, not the bytes, is
// most of the cost (docs/BENCHMARKS.md). The all-reduce is timed from the
// later rank's readiness, as mpexec reports it, each rank having computed
// 1 ms before it. Each is timed at a small and a large size and fitted as
// latency + bytes / bandwidth (the planner's Link); for the all-reduce,
// per hop of a ring of two, which takes two.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace mp {

struct ProbedLink {
  double latency_ms = 0;
  double bytes_per_s = 0;
};

struct ProbedLinks {
  ProbedLink message;    // one boundary message between two processes
  ProbedLink allreduce;  // one hop of a ring all-reduce between two replicas
};

// Throws Error when the processes cannot meet (no Gloo in this build, no
// loopback port).
ProbedLinks ProbeProcessLinks();

// The all-reduce as a replica of a model pays it (mpexec's SyncGradients):
// two ranks as mpexec's replicas are, processes (rank 1 in a child forked
// from this one, forked_child.h; threads under ThreadSanitizer), each
// running `step(rank)` before every round (a
// training step of the model, returning its parameters, their .grad()
// filled: added into where they are defined, as a backward does), then
// summing the gradients over the two as mpexec does, with its code
// (gradient_sum.h: gathered into a buffer kept from round to round,
// summed, each .grad() a view of the sum). Before each round after the
// first, the last round's parameters' gradients are zeroed in that buffer
// or dropped, as mpexec's are before a step (ZeroIfKept). Timed from the
// later rank's readiness; the first `warmup` rounds dropped, the mean of
// the middle 80% of the rest (both ranks' ends; MiddleMean, timer.h).
// Beside it, what a replica waits for the other: how far apart the two
// ranks' steps ended (the earlier waits for the later before the sum; a
// round of two costs the ranks' mean step and sum plus half of it), and
// the round, from the later readiness to the next: both middle means.
// Throws Error where the ranks cannot meet or a step fails.
struct StepAllReduce {
  int64_t bytes = 0;  // of the summed buffer
  double ms = 0;
  double gap_ms = 0;    // |rank 0's readiness - rank 1's|
  double round_ms = 0;  // the later readiness to the next round's
};
StepAllReduce ProbeAllReduceAfterStep(const std::function<std::vector<at::Tensor>(int rank)>& step, int warmup,
                                      int timed);

}  // namespace mp
