#include "planner/graph/output_layout.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "planner/graph/run_graph.h"

namespace mp {

std::vector<int64_t> OutputLayout::ShapeAt(size_t t, int64_t batch) const {
  std::vector<int64_t> shape = shapes.at(t);
  if (batch_dims.at(t) >= 0) shape[batch_dims[t]] *= batch;  // a batch folded into a dimension scales it
  return shape;
}

OutputLayout ProbeOutputs(const CanonicalGraph& canonical, const std::vector<TensorSpec>& inputs) {
  // Batches of 2 and 4: BatchNorm in training refuses a batch of 1. The
  // state is cloned so that training-mode running statistics stay as loaded.
  at::NoGradGuard no_grad;
  std::vector<std::vector<at::Tensor>> probes;
  std::vector<int> output_of;  // per tensor, the output holding it
  std::vector<TensorSpec> specs;
  std::vector<c10::IValue> two;  // batch 2's inputs
  for (int64_t batch : {2, 4}) {
    std::vector<at::Tensor> flat;
    output_of.clear();
    try {
      if (batch == 2) {
        specs = WithBatch(inputs, 2);
        two = SyntheticInputs(specs);
      }
      // Batch 4 is batch 2's samples twice, so that a scalar the model
      // computes over them shows whether it averages or sums (`doubled`).
      std::vector<c10::IValue> stack = two;
      if (batch == 4) {
        for (size_t i = 0; i < specs.size(); ++i) {
          const at::Tensor t = two[i].toTensor();
          stack[i] = at::cat({t, t}, specs[i].batch_dim);
        }
      }
      for (const auto& p : canonical.params) stack.emplace_back(p.tensor.clone());
      const auto outputs = GraphRunner(canonical.graph, "batch_probe").Run(std::move(stack));
      for (size_t k = 0; k < outputs.size(); ++k) {
        for (auto& t : FlattenTensors(outputs[k])) flat.push_back(t), output_of.push_back(int(k));
      }
    } catch (const std::exception& e) {
      OutputLayout refused;  // no output can be joined
      refused.error = Concat("the model refuses its inputs at batch ", batch,
                             " (its outputs are run at batches of 2 and 4 to find which dimension grows with the "
                             "batch): ",
                             ErrorLine(e.what()));
      return refused;
    }
    probes.push_back(std::move(flat));
  }
  OutputLayout layout;
  for (size_t i = 0; i < probes[0].size() && i < probes[1].size(); ++i) {
    const at::Tensor &two = probes[0][i], &four = probes[1][i];
    int dim = -1;
    std::vector<int64_t> shape = two.sizes().vec();
    if (two.dim() == four.dim()) {
      for (int64_t d = 0; d < two.dim(); ++d) {
        if (four.size(d) == 2 * two.size(d) && two.size(d) > 0 && two.size(d) % 2 == 0) {
          dim = static_cast<int>(d);
          shape[d] /= 2;
          break;
        }
      }
    }
    layout.batch_dims.push_back(dim);
    layout.shapes.push_back(shape);
    layout.dtypes.push_back(two.scalar_type());
    layout.output_of.push_back(output_of.at(i));
    const bool scalar = two.numel() == 1 && four.numel() == 1 && two.is_floating_point();
    const double once = scalar ? two.item<double>() : 0;
    layout.doubled.push_back(scalar && once != 0 && std::isfinite(once) ? four.item<double>() / once
                                                                         : std::nan(""));
  }
  return layout;
}

std::string OutputLayout::Name(size_t t) const {
  const int k = output_of.at(t);
  const auto first = std::find(output_of.begin(), output_of.end(), k);
  const auto count = std::count(output_of.begin(), output_of.end(), k);
  const std::string shape = Concat("shape ", c10::IntArrayRef(shapes.at(t)));
  if (count == 1) return Concat("output ", k, " (", shape, ")");
  return Concat("output ", k, "'s tensor ", t - size_t(first - output_of.begin()), " (", shape, ")");
}

bool OutputLayout::IsLoss(size_t t) const {
  return shapes.at(t).empty() && batch_dims.at(t) < 0 && c10::isFloatingType(dtypes.at(t));
}

std::optional<size_t> OutputLayout::ScalarLoss() const {
  for (size_t t = 0; t < shapes.size(); ++t) {
    if (IsLoss(t)) return t;
  }
  return std::nullopt;
}

std::string WhyUntrainable(const OutputLayout& layout) {
  if (!layout.error.empty()) return layout.error;
  if (layout.shapes.empty()) return "the model returns no tensor to train on";
  if ((layout.batch_dims[0] >= 0 && layout.output_of[0] == 0) || layout.ScalarLoss()) return "";
  return Concat(layout.Name(0), " has no dimension that grows with the batch, and no output is a floating-point "
                "scalar (a loss the model computes): mpexec trains on output 0 along the batch (--loss mse or "
                "cross_entropy) or on such a loss (--loss output)");
}

std::optional<size_t> OutputLayout::FirstUnjoinable() const {
  for (size_t t = 0; t < batch_dims.size(); ++t) {
    if (batch_dims[t] < 0) return t;
  }
  return std::nullopt;
}

}  // namespace mp
