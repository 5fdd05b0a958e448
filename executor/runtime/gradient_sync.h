// After every worker of a training step is done: gradients joined, summed
// where several ranks hold parts of them, and the optimizer step. Only a
// step every stage finished gets here, so a failed one leaves the model as
// it was (BatchNorm's running statistics excepted: the forward updates them).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "executor/loaded_plan.h"
#include "executor/pipeline.h"

namespace mp {

// Before a training step: every gradient dropped, as the step's first
// micro-batch expects, but those the last step's sums left in their kept
// buffers (Distribution::gather_buffers), zeroed there for the backward to
// add into (ZeroIfKept, gradient_sum.h). Returns, per program of the plan,
// the bytes of gradients so kept.
std::vector<int64_t> ResetGradients(const LoadedPlan& loaded, const Distribution* dist);

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

// With the optimizer's clip_grad_norm set: scales the gradients of every
// parameter this rank's stages read as torch.nn.utils.clip_grad_norm_ does
// over the whole model's (each parameter counted once over the ranks,
// summed over every rank) and returns that total norm; 0 without clipping.
double ClipGradientNorm(const LoadedPlan& loaded, const Distribution* dist, const Optimizer& optimizer);

// The parameters this rank's optimizer steps, by the device (program index)
// that steps them: each one its stages read, once, on the device of the
// first stage that reads it. Each device steps its own at the same time,
// as the plan predicts (PlanStage::optimizer_ms); Optimizer::Step touches
// only its parameter's state.
std::map<int, std::vector<size_t>> StepsByDevice(const LoadedPlan& loaded, const Distribution* dist);

}  // namespace mp
