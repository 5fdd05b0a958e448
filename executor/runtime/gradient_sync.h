// After every worker of a training step is done: gradients joined, summed
// where several ranks hold parts of them, and the optimizer step. Only a
// step every stage finished gets here, so a failed one leaves the model as
// it was (BatchNorm's running statistics excepted: the forward updates them).
#pragma once

#include <vector>

#include "executor/loaded_plan.h"
#include "executor/pipeline.h"

namespace mp {

// Tied parameters: the aliases' gradients join the real tensor's. Under a
// Distribution, a parameter read by stages of several ranks gets the sum of
// their gradients on every one, and each of this rank's stages sums its
// gradients over its replicas (the loss is normalised by the whole batch,
// so the sum is the whole batch's gradient). Returns each stage's
// all-reduce time in ms (0 where none ran).
std::vector<double> SyncGradients(const LoadedPlan& loaded, const Distribution* dist);

// SGD on every parameter this rank's stages read, once.
void StepOptimizer(const LoadedPlan& loaded, const Distribution* dist, Sgd& sgd);

}  // namespace mp
