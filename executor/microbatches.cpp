// Micro-batches: split along each input's batch dimension, join outputs
// along the dimension the batch probe found.
#include "executor/microbatches.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "common/error.h"
#include "planner/graph/run_graph.h"

namespace mp {
namespace {

// Joins one output across micro-batches; `next` walks the output tensors in
// FlattenTensors order, which is the layout's order.
c10::IValue Join(const std::vector<c10::IValue>& parts, const OutputLayout& layout, size_t& next, size_t k) {
  const c10::IValue& first = parts.front();
  if (first.isTensor()) {
    const size_t t = next++;
    const int dim = t < layout.batch_dims.size() ? layout.batch_dims[t] : -1;
    std::vector<at::Tensor> tensors;
    for (const auto& p : parts) tensors.push_back(p.toTensor());
    if (tensors.size() == 1) return tensors.front();
    if (dim < 0 || dim >= tensors.front().dim()) {
      const std::string name = t < layout.batch_dims.size() ? layout.Name(t) : Concat("model output ", k);
      throw InputError(Concat(name, ": no dimension grows with the batch, so its micro-batches and replicas cannot "
                              "be joined; plan this model's inference with 1 micro-batch and no replicas"));
    }
    return at::cat(tensors, dim);
  }
  if (first.isTuple()) {
    std::vector<c10::IValue> joined;
    for (size_t i = 0; i < first.toTupleRef().elements().size(); ++i) {
      std::vector<c10::IValue> column;
      for (const auto& p : parts) column.push_back(p.toTupleRef().elements()[i]);
      joined.push_back(Join(column, layout, next, k));
    }
    return c10::ivalue::Tuple::create(std::move(joined));
  }
  if (parts.size() == 1) return first;
  // A list joins item by item, a dict value by value (torchvision's
  // segmentation models return {"out": ..., "aux": ...}): the same length
  // or keys in every micro-batch.
  if (first.isList()) {
    const size_t length = first.toListRef().size();
    c10::impl::GenericList joined(first.toList().elementType());
    for (size_t i = 0; i < length; ++i) {
      std::vector<c10::IValue> column;
      for (const auto& p : parts) {
        if (p.toListRef().size() != length) {
          throw InputError(Concat("model output ", k, ": a list of ", length, " in one micro-batch and of ",
                                  p.toListRef().size(), " in another, which cannot be joined"));
        }
        column.push_back(p.toListRef()[i]);
      }
      joined.push_back(Join(column, layout, next, k));
    }
    return joined;
  }
  if (first.isGenericDict()) {
    const c10::impl::GenericDict dict = first.toGenericDict();
    c10::impl::GenericDict joined(dict.keyType(), dict.valueType());
    for (const auto& item : dict) {
      std::vector<c10::IValue> column;
      for (const auto& p : parts) {
        const c10::impl::GenericDict other = p.toGenericDict();
        if (other.size() != dict.size() || !other.contains(item.key())) {
          throw InputError(Concat("model output ", k, ": a dict whose keys differ between micro-batches, which "
                                  "cannot be joined"));
        }
        column.push_back(other.at(item.key()));
      }
      joined.insert(item.key(), Join(column, layout, next, k));
    }
    return joined;
  }
  // A member that is None (GoogLeNet's auxiliary logits outside training)
  // in every micro-batch is None in the whole batch.
  if (first.isNone() && std::all_of(parts.begin(), parts.end(), [](const c10::IValue& p) { return p.isNone(); })) {
    return first;
  }
  throw InputError(Concat("model output ", k, " is a ", first.tagKind(),
                          ": only tensors, and tuples, lists and dicts of them, are joined"));
}

}  // namespace

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
                                          const OutputLayout& layout) {
  std::vector<c10::IValue> joined;
  size_t next = 0;
  for (size_t k = 0; k < outputs.front().size(); ++k) {
    std::vector<c10::IValue> parts;
    for (const auto& mb : outputs) parts.push_back(mb[k]);
    joined.push_back(Join(parts, layout, next, k));
  }
  return joined;
}

}  // namespace mp
