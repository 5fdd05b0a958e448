// After every worker of a training step is done: gradients joined, summed
// where several ranks hold parts of them, and the optimizer step. Only a
// step every stage finished gets here, so a failed one leaves the model as
// it was (BatchNorm's running statistics excepted: the forward updates them).
#pragma once

#include <cstdint>
#include <vector>

#include "executor/loaded_plan.h"
#include "executor/pipeline.h"

namespace mp {

// Tied parameters: the aliases' gradients join the real tensor's. Under a
// Distribution, a parameter read by stages of several ranks gets the sum of
// their gradients on every one, and each of this rank's stages sums its
// gradients over its replicas (the loss is normalised by the whole batch,
// so the sum is the whole batch's gradient). Returns, per stage, when this
// rank's copy was ready to all-reduce and when the all-reduce ended (zeros
// where none ran): the all-reduce itself starts when the last replica is
// ready, which GatherRuns learns from the other ranks' runs.
struct AllReduceSpan {
  int64_t ready_ns = 0, end_ns = 0;  // steady clock, common to a host's processes
};
std::vector<AllReduceSpan> SyncGradients(const LoadedPlan& loaded, const Distribution* dist);

// Per parameter: whether this rank steps it (its stages read it); all
// without a Distribution.
std::vector<bool> SteppedHere(const LoadedPlan& loaded, const Distribution* dist);

// The optimizer's step on every parameter this rank's stages read, once;
// with clip_grad_norm set, after scaling the gradients as
// torch.nn.utils.clip_grad_norm_ does over the whole model's (each
// parameter counted once over the ranks, summed over every rank). Returns
// that total norm (0 without clipping).
double StepOptimizer(const LoadedPlan& loaded, const Distribution* dist, Optimizer& optimizer);

}  // namespace mp
