// Micro-batches: split along each input's batch dimension, join outputs
// along the dimension the batch probe found.
#include "executor/microbatches.h"

#include <ATen/ATen.h>

#include "common/error.h"
#include "planner/graph/run_graph.h"

namespace mp {
namespace {

// Joins one output across micro-batches; `next` walks the output tensors in
// FlattenTensors order, which is the order of `batch_dims`.
c10::IValue Join(const std::vector<c10::IValue>& parts, const std::vector<int>& batch_dims, size_t& next, size_t k) {
  const c10::IValue& first = parts.front();
  if (first.isTensor()) {
    const int dim = next < batch_dims.size() ? batch_dims[next] : -1;
    ++next;
    std::vector<at::Tensor> tensors;
    for (const auto& p : parts) tensors.push_back(p.toTensor());
    if (tensors.size() == 1) return tensors.front();
    if (dim < 0 || dim >= tensors.front().dim()) {
      throw InputError(Concat("model output ", k, ": no dimension grows with the batch; cannot join its micro-batches"));
    }
    return at::cat(tensors, dim);
  }
  if (first.isTuple()) {
    std::vector<c10::IValue> joined;
    for (size_t i = 0; i < first.toTupleRef().elements().size(); ++i) {
      std::vector<c10::IValue> column;
      for (const auto& p : parts) column.push_back(p.toTupleRef().elements()[i]);
      joined.push_back(Join(column, batch_dims, next, k));
    }
    return c10::ivalue::Tuple::create(std::move(joined));
  }
  if (parts.size() == 1) return first;
  throw InputError(Concat("model output ", k, " is a ", first.tagKind(), ": only tensors and tuples of them are joined"));
}

}  // namespace

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
  for (int64_t batch : {2, 4}) {
    std::vector<at::Tensor> flat;
    try {
      std::vector<c10::IValue> stack = SyntheticInputs(WithBatch(inputs, batch));
      for (const auto& p : canonical.params) stack.emplace_back(p.tensor.clone());
      for (const auto& v : GraphRunner(canonical.graph, "batch_probe").Run(std::move(stack))) {
        for (auto& t : FlattenTensors(v)) flat.push_back(t);
      }
    } catch (const std::exception& e) {
      OutputLayout refused;  // no output can be joined
      refused.error = Concat("the model refuses the plan's inputs at batch ", batch, ": ", ErrorLine(e.what()));
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
  }
  return layout;
}

std::vector<at::Tensor> SplitTensor(const Plan& plan, const at::Tensor& full, int dim, const std::string& what) {
  if (full.dim() <= dim || full.size(dim) != plan.batch) {
    throw InputError(Concat(what, ": expected ", plan.batch, " samples along dimension ", dim, ", found shape ",
                            full.sizes()));
  }
  if (plan.replicas <= 1) return full.split(plan.microbatch_size, dim);
  std::vector<at::Tensor> parts;
  for (const at::Tensor& share : full.split(ReplicaBatch(plan), dim)) {
    for (at::Tensor& part : share.split(plan.microbatch_size, dim)) parts.push_back(std::move(part));
  }
  return parts;
}

std::vector<std::vector<c10::IValue>> SplitMicrobatches(const Plan& plan, const std::vector<c10::IValue>& inputs) {
  std::vector<std::vector<c10::IValue>> out(size_t(plan.replicas) * plan.microbatches);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].isTensor()) {
      for (auto& mb : out) mb.push_back(inputs[i]);
      continue;
    }
    const int dim = i < plan.inputs.size() ? plan.inputs[i].batch_dim : 0;
    const auto parts = SplitTensor(plan, inputs[i].toTensor(), dim, Concat("input ", i));
    // Copies, not views: a model that writes into its input (x.add_(h))
    // writes into its micro-batch's own copy, so the caller's tensors, and
    // the reference run that --verify makes on them, see the inputs as given.
    for (size_t mb = 0; mb < out.size(); ++mb) out[mb].push_back(parts[mb].clone());
  }
  return out;
}

std::vector<c10::IValue> JoinMicrobatches(const std::vector<std::vector<c10::IValue>>& outputs,
                                          const std::vector<int>& batch_dims) {
  std::vector<c10::IValue> joined;
  size_t next = 0;
  for (size_t k = 0; k < outputs.front().size(); ++k) {
    std::vector<c10::IValue> parts;
    for (const auto& mb : outputs) parts.push_back(mb[k]);
    joined.push_back(Join(parts, batch_dims, next, k));
  }
  return joined;
}

}  // namespace mp
