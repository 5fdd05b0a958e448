// How a model's outputs relate to the batch, found by running it at two
// batch sizes: which dimension of each output tensor grows with the batch
// (where micro-batches' and replicas' outputs are joined), and the shapes
// training's labels take. mpexec joins outputs by it (executor/
// microbatches.h); mpplan plans inference of a model whose outputs cannot
// be joined with one micro-batch and no replicas.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "planner/graph/canonical_graph.h"
#include "planner/graph/input_spec.h"

namespace mp {

// How the model's output tensors (FlattenTensors order over the outputs)
// relate to the batch.
struct OutputLayout {
  // The dimension of each output tensor that grows with the batch: the one
  // that doubles between runs at batch 2 and 4 (-1 where none does). [layers,
  // B, H] LSTM states are why the shapes alone cannot tell: at a micro-batch
  // of 2, layers is 2 as well.
  std::vector<int> batch_dims;
  std::vector<std::vector<int64_t>> shapes;  // each tensor's shape at batch 1 (per sample)
  std::vector<c10::ScalarType> dtypes;
  std::vector<int> output_of;  // the model output (forward's return, a tuple's elements apart) holding each
  // Per tensor, for a floating-point scalar (a loss the model computes):
  // its value for the batch-2 probe's samples given twice over its value
  // for them once. A mean over the samples stays at 1, a sum doubles. NaN
  // for the other tensors and where the first value is 0 or not finite.
  std::vector<double> doubled;
  std::string error;  // why the probe failed (the layout is then empty)
  // Output tensor t's shape for `batch` samples.
  std::vector<int64_t> ShapeAt(size_t t, int64_t batch) const;
  // Output tensor t as a user finds it: "output K (shape S)", or "output
  // K's tensor T (shape S)" where output K holds several; S at batch 1.
  std::string Name(size_t t) const;
  // The first output tensor that no dimension of grows with the batch,
  // which micro-batches' and replicas' outputs cannot be joined along.
  std::optional<size_t> FirstUnjoinable() const;
  // Whether output tensor t is a floating-point scalar that does not grow
  // with the batch: a loss the model computes (--loss output).
  bool IsLoss(size_t t) const;
  // The first output tensor that is such a loss (what mpexec's --loss
  // output trains on); nullopt where none is.
  std::optional<size_t> ScalarLoss() const;
};

// Training: why mpexec can train on none of the outputs, "" where it can.
// It trains on output 0 along its batch dimension (--loss mse or
// cross_entropy) or on a floating-point scalar the model returns (--loss
// output), both found by the probe; a model that refuses the probe's
// batches, or returns neither, it cannot train.
std::string WhyUntrainable(const OutputLayout& layout);

// Runs the graph at batch 2 and 4 (the batch-2 samples twice) to find the
// layout; empty, with `error` set, when the model refuses such batches
// (then no output can be joined or trained on).
OutputLayout ProbeOutputs(const CanonicalGraph& canonical, const std::vector<TensorSpec>& inputs);

}  // namespace mp
