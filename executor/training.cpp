// Loss, labels and SGD, in the form micro-batched training needs: a loss
// that sums over micro-batches to the batch's mean.
#include "executor/training.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "common/error.h"
#include "planner/graph/run_graph.h"

namespace mp {
namespace {

// Output 0's shape for the batch, and its class count (last dimension).
// kOutput: one per sample, the shares MicrobatchLoss scales by.
std::vector<int64_t> TargetShape(const OutputLayout& layout, int64_t batch, LossKind loss) {
  if (!layout.error.empty()) throw InputError(Concat("training: ", layout.error));
  if (layout.shapes.empty()) throw InputError("training needs a tensor output; the model returns none");
  if (loss == LossKind::kOutput) {
    LossTensor(layout, loss);  // that there is one
    return {batch};
  }
  if (!c10::isFloatingType(layout.dtypes[0])) {
    throw InputError(Concat("training needs a floating-point output 0, the model's is ", DtypeName(layout.dtypes[0])));
  }
  std::vector<int64_t> shape = layout.ShapeAt(0, batch);
  if (layout.batch_dims[0] < 0) {
    throw InputError(Concat("training: output 0 (shape ", c10::IntArrayRef(shape), ") has no batch dimension",
                            layout.IsLoss(0) ? "; if it is the model's own loss, --loss output trains on it" : ""));
  }
  if (loss == LossKind::kCrossEntropy &&
      (shape.size() < 2 || layout.batch_dims[0] == int(shape.size()) - 1)) {
    throw InputError(Concat("--loss cross_entropy needs classes along output 0's last dimension, after its batch "
                            "dimension; output 0 has shape ",
                            c10::IntArrayRef(shape)));
  }
  return shape;
}

}  // namespace

LossKind ParseLoss(const std::string& name) {
  if (name == "mse") return LossKind::kMse;
  if (name == "cross_entropy") return LossKind::kCrossEntropy;
  if (name == "output") return LossKind::kOutput;
  throw InputError(Concat("--loss: unknown loss '", name, "' (expected mse, cross_entropy or output)"));
}

const char* LossName(LossKind kind) {
  switch (kind) {
    case LossKind::kMse: return "mse";
    case LossKind::kCrossEntropy: return "cross_entropy";
    case LossKind::kOutput: return "output";
  }
  return "mse";
}

size_t LossTensor(const OutputLayout& layout, LossKind loss) {
  if (!layout.error.empty()) throw InputError(Concat("training: ", layout.error));
  if (loss != LossKind::kOutput) {
    if (layout.output_of.empty() || layout.output_of[0] != 0) {
      throw InputError("training needs a tensor as the model's first output");
    }
    return 0;
  }
  if (const auto t = layout.ScalarLoss()) return *t;
  std::vector<std::string> names;
  for (size_t t = 0; t < layout.shapes.size(); ++t) names.push_back(layout.Name(t));
  throw InputError(Concat("--loss output: no output of the model is a floating-point scalar, a loss it computes (it "
                          "returns ",
                          names.empty() ? std::string("no tensor") : JoinNames(names), ")"));
}

LossReduction OwnLossReduction(const OutputLayout& layout, LossKind loss) {
  if (loss != LossKind::kOutput) return LossReduction::kMean;
  const size_t tensor = LossTensor(layout, loss);
  const double doubled = tensor < layout.doubled.size() ? layout.doubled[tensor] : std::nan("");
  if (std::abs(doubled - 1) <= 0.1) return LossReduction::kMean;
  if (std::abs(doubled - 2) <= 0.2) return LossReduction::kSum;
  return LossReduction::kUnknown;
}

const char* ReductionName(LossReduction reduction) {
  switch (reduction) {
    case LossReduction::kMean: return "mean";
    case LossReduction::kSum: return "sum";
    case LossReduction::kUnknown: return "unknown";
  }
  return "unknown";
}

int LabelsBatchDim(const OutputLayout& layout, LossKind loss) {
  return loss == LossKind::kOutput ? 0 : layout.batch_dims.at(0);
}

at::Tensor SyntheticLabels(const OutputLayout& layout, int64_t batch, LossKind loss, uint64_t seed) {
  std::vector<int64_t> shape = TargetShape(layout, batch, loss);
  if (loss == LossKind::kOutput) return at::ones(shape, at::kFloat);
  at::Generator gen = at::detail::createCPUGenerator(seed + 7919);
  const bool one_hot = shape.size() >= 2 && layout.batch_dims[0] != int(shape.size()) - 1;
  if (!one_hot) return at::randn(shape, gen, at::TensorOptions().dtype(layout.dtypes[0]));
  const int64_t classes = shape.back();
  std::vector<int64_t> rows(shape.begin(), shape.end() - 1);
  const at::Tensor indices = at::randint(classes, rows, gen, at::TensorOptions().dtype(at::kLong));
  if (loss == LossKind::kCrossEntropy) return indices;
  return at::zeros(shape, at::TensorOptions().dtype(layout.dtypes[0])).scatter_(-1, indices.unsqueeze(-1), 1.0);
}

void CheckLabels(const at::Tensor& labels, const OutputLayout& layout, int64_t batch, LossKind loss,
                 const std::string& what) {
  std::vector<int64_t> shape = TargetShape(layout, batch, loss);
  if (loss == LossKind::kOutput) {
    if (labels.sizes().vec() != shape || !labels.is_floating_point() || !labels.eq(1).all().item<bool>()) {
      throw InputError(Concat(what, ": --loss output trains on the model's own loss, which takes no labels (give "
                              "the model its targets as an input)"));
    }
    return;
  }
  if (loss == LossKind::kCrossEntropy) shape.pop_back();
  if (labels.sizes().vec() != shape) {
    throw InputError(Concat(what, ": labels of shape ", labels.sizes(), ", --loss ", LossName(loss), " needs ",
                            c10::IntArrayRef(shape)));
  }
  const bool want_integer = loss == LossKind::kCrossEntropy;
  if (want_integer ? labels.scalar_type() != at::kLong : !labels.is_floating_point()) {
    throw InputError(Concat(what, ": labels of dtype ", DtypeName(labels.scalar_type()), ", --loss ", LossName(loss),
                            " needs ", want_integer ? "int64 class indices" : "floating-point targets"));
  }
}

at::Tensor MicrobatchLoss(const at::Tensor& given, const at::Tensor& labels, LossKind loss, int64_t batch_elements,
                          LossReduction reduction) {
  // In float32 for a half or bfloat16 output, as torch.autocast runs its
  // losses: a sum over the batch in 8 bits of mantissa loses the small
  // terms, and LibTorch 1.13 has no bfloat16 mse on CPU ("mse_cpu" not
  // implemented for 'BFloat16', a bfloat16 MLP's first step).
  const bool reduced = given.scalar_type() == at::kHalf || given.scalar_type() == at::kBFloat16;
  const at::Tensor output = reduced ? given.to(at::kFloat) : given;
  if (loss == LossKind::kOutput) {
    if (output.numel() != 1) throw InputError(Concat("--loss output: the model's loss has shape ", output.sizes()));
    if (reduction == LossReduction::kSum) return output.reshape({});
    return output.reshape({}) * (double(labels.numel()) / double(batch_elements));
  }
  at::Tensor sum;
  if (loss == LossKind::kMse) {
    sum = at::mse_loss(output, labels.to(output.scalar_type()), at::Reduction::Sum);
  } else {
    const int64_t classes = output.size(-1);
    sum = at::cross_entropy_loss(output.reshape({-1, classes}), labels.reshape({-1}), {}, at::Reduction::Sum);
  }
  return sum / double(batch_elements);
}

}  // namespace mp
