// SendMessage / ReceiveMessage. Two sends on one tag: three sizes (int64[3]:
// body bytes, metadata entries, all bytes), then one byte buffer holding
// - the body, tuple(microbatch, tuple(values), tuple(tuple(grad or None)),
//   indices of uninitialized values), pickled by torch::jit::pickle with a
//   tensor table, so it holds indices instead of tensor data;
// - per table tensor its dtype, requires_grad, rank and sizes (int64, from
//   the next multiple of 8);
// - every table tensor's bytes, one after another.
// The copies into and out of the buffer are memcpy speed. Two sends instead
// of one per part and tensor measured the same (docs/BENCHMARKS.md).
#include "executor/wire.h"

#include <ATen/ATen.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <cstring>

#include "common/error.h"

namespace mp {
namespace {

int64_t RoundUp8(int64_t n) { return (n + 7) / 8 * 8; }

}  // namespace

void SendMessage(ProcessGroup& group, int dst, int tag, const WireMessage& message) {
  std::vector<c10::IValue> grads;
  for (const auto& per_value : message.grads) {
    std::vector<c10::IValue> items;
    for (const at::Tensor& g : per_value) items.push_back(g.defined() ? c10::IValue(g) : c10::IValue());
    grads.push_back(c10::ivalue::Tuple::create(std::move(items)));
  }
  // An uninitialized value (the untaken side of an early return) does not
  // pickle: it goes as None, its index listed.
  std::vector<c10::IValue> values = message.values;
  std::vector<int64_t> uninitialized;
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i].tagKind() == "Uninitialized") values[i] = c10::IValue(), uninitialized.push_back(int64_t(i));
  }
  const c10::IValue body = c10::ivalue::Tuple::create({message.microbatch, c10::ivalue::Tuple::create(std::move(values)),
                                                       c10::ivalue::Tuple::create(std::move(grads)),
                                                       c10::IValue(uninitialized)});
  std::vector<at::Tensor> table;
  const std::vector<char> pickled = torch::jit::pickle(body, &table);
  // Per tensor: dtype, requires_grad, dimensions, then the sizes.
  std::vector<int64_t> metas;
  std::vector<at::Tensor> data;
  int64_t data_bytes = 0;
  for (const at::Tensor& t : table) {
    if (t.layout() != at::kStrided) throw InputError("only dense tensors can go between processes");
    metas.insert(metas.end(), {int64_t(t.scalar_type()), int64_t(t.requires_grad()), t.dim()});
    metas.insert(metas.end(), t.sizes().begin(), t.sizes().end());
    data.push_back(t.detach().to(at::kCPU).contiguous());
    data_bytes += int64_t(data.back().nbytes());
  }
  const int64_t metas_at = RoundUp8(int64_t(pickled.size()));
  const int64_t data_at = metas_at + int64_t(metas.size() * sizeof(int64_t));
  at::Tensor buffer = at::empty({data_at + data_bytes}, at::kByte);
  char* out = static_cast<char*>(buffer.data_ptr());
  std::memcpy(out, pickled.data(), pickled.size());
  if (!metas.empty()) std::memcpy(out + metas_at, metas.data(), metas.size() * sizeof(int64_t));
  int64_t offset = data_at;
  for (const at::Tensor& t : data) {
    if (t.nbytes() > 0) std::memcpy(out + offset, t.data_ptr(), t.nbytes());
    offset += int64_t(t.nbytes());
  }
  group.Send(dst, tag, at::tensor({int64_t(pickled.size()), int64_t(metas.size()), buffer.numel()}, at::kLong));
  if (buffer.numel() > 0) group.Send(dst, tag, buffer);
}

WireMessage ReceiveMessage(ProcessGroup& group, int src, int tag) {
  at::Tensor sizes = at::empty({3}, at::kLong);
  group.Receive(src, tag, sizes);
  const int64_t body_bytes = sizes[0].item<int64_t>(), meta_count = sizes[1].item<int64_t>();
  at::Tensor buffer = at::empty({sizes[2].item<int64_t>()}, at::kByte);
  if (buffer.numel() > 0) group.Receive(src, tag, buffer);
  const char* in = static_cast<const char*>(buffer.data_ptr());
  const int64_t metas_at = RoundUp8(body_bytes);
  int64_t offset = metas_at + meta_count * int64_t(sizeof(int64_t));
  if (body_bytes < 0 || meta_count < 0 || offset > buffer.numel()) {
    throw InternalError(Concat("a message from rank ", src, " that does not add up"));
  }
  std::vector<int64_t> metas(static_cast<size_t>(meta_count));
  if (meta_count > 0) std::memcpy(metas.data(), in + metas_at, metas.size() * sizeof(int64_t));
  std::vector<at::Tensor> table;
  for (size_t m = 0; m < metas.size();) {
    const auto dtype = at::ScalarType(metas[m]);
    const bool requires_grad = metas[m + 1] != 0;
    const std::vector<int64_t> shape(metas.begin() + m + 3, metas.begin() + m + 3 + metas[m + 2]);
    m += 3 + shape.size();
    at::Tensor t = at::empty(shape, dtype);
    if (offset + int64_t(t.nbytes()) > buffer.numel()) {
      throw InternalError(Concat("a message from rank ", src, " that does not add up"));
    }
    if (t.nbytes() > 0) std::memcpy(t.data_ptr(), in + offset, t.nbytes());
    offset += int64_t(t.nbytes());
    if (requires_grad) t.requires_grad_(true);
    table.push_back(t);
  }
  const c10::IValue body = torch::jit::unpickle(in, size_t(body_bytes), nullptr, table);
  const auto& items = body.toTupleRef().elements();
  WireMessage message;
  message.microbatch = items.at(0).toInt();
  for (const c10::IValue& v : items.at(1).toTupleRef().elements()) message.values.push_back(v);
  for (int64_t i : items.at(3).toIntVector()) message.values.at(size_t(i)) = c10::IValue::uninitialized();
  for (const c10::IValue& per_value : items.at(2).toTupleRef().elements()) {
    std::vector<at::Tensor>& grads = message.grads.emplace_back();
    for (const c10::IValue& g : per_value.toTupleRef().elements()) grads.push_back(g.isNone() ? at::Tensor() : g.toTensor());
  }
  return message;
}

}  // namespace mp
