// What a training step adds to a forward pass: the loss on the model's first
// output tensor and the labels it is measured against (the optimizer step:
// optimizer.h); or
// the loss the model computes itself (--loss output: nanoGPT's
// `logits, loss = model(idx, targets)`, a Hugging Face model given labels).
// The pipeline and the single-device reference both use these, so a
// difference between them can only come from the pipelining.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "executor/microbatches.h"
#include "executor/optimizer.h"

namespace mp {

enum class LossKind { kMse, kCrossEntropy, kOutput };

// "mse" | "cross_entropy" | "output"; InputError otherwise.
LossKind ParseLoss(const std::string& name);
const char* LossName(LossKind kind);

struct TrainingOptions {
  LossKind loss = LossKind::kMse;
  OptimizerOptions optimizer;  // default: the plan's optimizer, lr 0.001 (the tutorial's and Adam's)
};

// The output tensor (FlattenTensors order over the outputs) the loss is
// taken on: tensor 0, which must be output 0's; with kOutput the first
// floating-point scalar, a loss the model computed (a mean over its
// micro-batch, as F.cross_entropy's default reduction gives). InputError
// naming the outputs when there is none.
size_t LossTensor(const OutputLayout& layout, LossKind loss);

// How a loss the model computes (kOutput) treats its samples: a mean over
// them, as F.cross_entropy's default reduction gives, or a sum
// (reduction="sum", `((y - t) ** 2).sum()`), told by what it did when the
// same samples came twice (OutputLayout::doubled: within 10% of 1 or of
// 2); kUnknown where it did neither. mse and cross_entropy: kMean.
enum class LossReduction { kMean, kSum, kUnknown };
LossReduction OwnLossReduction(const OutputLayout& layout, LossKind loss);
const char* ReductionName(LossReduction reduction);

// The dimension the batch's labels split into micro-batches along: output
// 0's batch dimension; kOutput's "labels" are a [batch] tensor of ones
// (see MicrobatchLoss), split along 0.
int LabelsBatchDim(const OutputLayout& layout, LossKind loss);

// Labels for the whole batch, deterministic in `seed`. The loss is taken on
// output tensor 0 (FlattenTensors order) with its classes along the last
// dimension: mse compares it with one-hot rows (the tutorial's benchmark),
// cross_entropy with class indices shaped like it without the last
// dimension. Throws InputError when output 0 cannot carry that loss.
at::Tensor SyntheticLabels(const OutputLayout& layout, int64_t batch, LossKind loss, uint64_t seed = 0);

// Checks user labels (--labels) against what SyntheticLabels would make:
// shape and dtype kind. Throws InputError naming `what`.
void CheckLabels(const at::Tensor& labels, const OutputLayout& layout, int64_t batch, LossKind loss,
                 const std::string& what);

// The loss of one micro-batch, scaled so that the micro-batches of a batch
// add up to the loss of the whole batch: the sum over elements divided by
// `batch_elements` (the element count of the whole batch's labels). So
// their gradients accumulate to the full-batch gradient. A half or bfloat16
// output's loss is taken in float32 (its gradient flows back in the
// output's own dtype). kOutput: `output` is the model's loss of the
// micro-batch and `labels` a tensor of ones, one per sample
// (SyntheticLabels). A mean over its samples (`reduction` kMean, or
// kUnknown) is scaled by the micro-batch's share of the batch's
// `batch_elements` samples, so the micro-batches add up to the batch's
// mean as well; a sum (kSum) is taken as it is: they add up to the batch's
// sum.
at::Tensor MicrobatchLoss(const at::Tensor& output, const at::Tensor& labels, LossKind loss, int64_t batch_elements,
                          LossReduction reduction = LossReduction::kMean);

}  // namespace mp
