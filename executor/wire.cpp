// SendMessage / ReceiveMessage. Four parts on one tag, in order: the sizes
// of the next two (int64[2]); the body, tuple(microbatch, tuple(values),
// tuple(tuple(grad or None))), pickled by torch::jit::pickle with a tensor
// table, so it holds indices instead of tensor data; per table tensor its
// dtype, requires_grad, rank and sizes (int64); then the data of every
// table tensor that has elements, each its own send.
#include "executor/wire.h"

#include <ATen/ATen.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include "common/error.h"

namespace mp {
namespace {

at::Tensor Dense(const at::Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }

}  // namespace

void SendMessage(ProcessGroup& group, int dst, int tag, const WireMessage& message) {
  std::vector<c10::IValue> grads;
  for (const auto& per_value : message.grads) {
    std::vector<c10::IValue> items;
    for (const at::Tensor& g : per_value) items.push_back(g.defined() ? c10::IValue(g) : c10::IValue());
    grads.push_back(c10::ivalue::Tuple::create(std::move(items)));
  }
  const c10::IValue body = c10::ivalue::Tuple::create(
      {message.microbatch, c10::ivalue::Tuple::create(message.values), c10::ivalue::Tuple::create(std::move(grads))});
  std::vector<at::Tensor> table;
  std::vector<char> pickled = torch::jit::pickle(body, &table);
  // Per tensor: dtype, requires_grad, dimensions, then the sizes.
  std::vector<int64_t> metas;
  for (const at::Tensor& t : table) {
    if (t.layout() != at::kStrided) throw InputError("only dense tensors can go between processes");
    metas.insert(metas.end(), {int64_t(t.scalar_type()), int64_t(t.requires_grad()), t.dim()});
    metas.insert(metas.end(), t.sizes().begin(), t.sizes().end());
  }
  group.Send(dst, tag, at::tensor({int64_t(pickled.size()), int64_t(metas.size())}, at::kLong));
  group.Send(dst, tag, at::from_blob(pickled.data(), {int64_t(pickled.size())}, at::kByte));
  if (!metas.empty()) group.Send(dst, tag, at::from_blob(metas.data(), {int64_t(metas.size())}, at::kLong));
  for (const at::Tensor& t : table) {
    if (t.numel() > 0) group.Send(dst, tag, Dense(t.detach()));
  }
}

WireMessage ReceiveMessage(ProcessGroup& group, int src, int tag) {
  at::Tensor sizes = at::empty({2}, at::kLong);
  group.Receive(src, tag, sizes);
  std::vector<char> pickled(size_t(sizes[0].item<int64_t>()));
  at::Tensor pickled_view = at::from_blob(pickled.data(), {int64_t(pickled.size())}, at::kByte);
  group.Receive(src, tag, pickled_view);
  at::Tensor metas = at::empty({sizes[1].item<int64_t>()}, at::kLong);
  if (metas.numel() > 0) group.Receive(src, tag, metas);
  const int64_t* m = metas.data_ptr<int64_t>();
  const int64_t* end = m + metas.numel();
  std::vector<at::Tensor> table;
  while (m < end) {
    const auto dtype = at::ScalarType(m[0]);
    const bool requires_grad = m[1] != 0;
    const std::vector<int64_t> shape(m + 3, m + 3 + m[2]);
    m += 3 + shape.size();
    at::Tensor t = at::empty(shape, dtype);
    if (t.numel() > 0) group.Receive(src, tag, t);
    if (requires_grad) t.requires_grad_(true);
    table.push_back(t);
  }
  const c10::IValue body = torch::jit::unpickle(pickled.data(), pickled.size(), nullptr, table);
  const auto& items = body.toTupleRef().elements();
  WireMessage message;
  message.microbatch = items.at(0).toInt();
  for (const c10::IValue& v : items.at(1).toTupleRef().elements()) message.values.push_back(v);
  for (const c10::IValue& per_value : items.at(2).toTupleRef().elements()) {
    std::vector<at::Tensor>& grads = message.grads.emplace_back();
    for (const c10::IValue& g : per_value.toTupleRef().elements()) grads.push_back(g.isNone() ? at::Tensor() : g.toTensor());
  }
  return message;
}

}  // namespace mp
