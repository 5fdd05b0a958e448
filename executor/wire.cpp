// SendMessage / ReceiveMessage, and WireStream. A message's bytes:
// - the body, tuple(microbatch, tuple(values), tuple(tuple(grad or None)),
//   indices of uninitialized values), pickled by torch::jit::pickle with a
//   tensor table, so it holds indices instead of tensor data;
// - per table tensor its dtype, requires_grad, rank and sizes (int64, from
//   the next multiple of 8);
// - every table tensor's bytes, one after another.
// SendMessage sends its sizes (int64[3]: body bytes, metadata entries, all
// bytes), then those bytes: two transfers on one tag. A WireStream sends
// one transfer of its capacity: a header (int64[4]: kMessage, body bytes,
// metadata entries, message bytes), the message, then whatever the buffer
// held; a message larger than the capacity is preceded by a header of
// kGrow and the new capacity, in a transfer of the old one. The copies into
// and out of the buffer are memcpy speed. Two sends instead of one per part
// and tensor measured the same (docs/BENCHMARKS.md).
#include "executor/wire.h"

#include <ATen/ATen.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <algorithm>
#include <cstring>

#include "common/error.h"

namespace mp {
namespace {

int64_t RoundUp8(int64_t n) { return (n + 7) / 8 * 8; }

// A message laid out for the wire, before its bytes are copied.
struct Packed {
  std::vector<char> pickled;
  std::vector<int64_t> metas;     // per table tensor: dtype, requires_grad, rank, sizes
  std::vector<at::Tensor> data;   // CPU tensors, any strides
  int64_t data_bytes = 0;
  int64_t MetasAt() const { return RoundUp8(int64_t(pickled.size())); }
  int64_t DataAt() const { return MetasAt() + int64_t(metas.size() * sizeof(int64_t)); }
  int64_t Bytes() const { return DataAt() + data_bytes; }
};

Packed Pack(const WireMessage& message) {
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
  Packed packed;
  std::vector<at::Tensor> table;
  packed.pickled = torch::jit::pickle(body, &table);
  // Per tensor: dtype, requires_grad, dimensions, then the sizes.
  for (const at::Tensor& t : table) {
    if (t.layout() != at::kStrided) throw InputError("only dense tensors can go between processes");
    packed.metas.insert(packed.metas.end(), {int64_t(t.scalar_type()), int64_t(t.requires_grad()), t.dim()});
    packed.metas.insert(packed.metas.end(), t.sizes().begin(), t.sizes().end());
    packed.data.push_back(t.detach().to(at::kCPU));
    packed.data_bytes += int64_t(packed.data.back().nbytes());
  }
  return packed;
}

// Copies the message's Bytes() to `out`.
void Write(const Packed& packed, char* out) {
  std::memcpy(out, packed.pickled.data(), packed.pickled.size());
  if (!packed.metas.empty()) {
    std::memcpy(out + packed.MetasAt(), packed.metas.data(), packed.metas.size() * sizeof(int64_t));
  }
  int64_t offset = packed.DataAt();
  for (const at::Tensor& t : packed.data) {
    // LibTorch's copy, not a memcpy of ours: it gathers a strided tensor in
    // one pass, and TSan (which sees none of LibTorch's reference counts)
    // took our read of a gradient the worker frees after the send for a
    // race (tools/sanitizers/tsan.supp, called_from_lib).
    if (t.numel() > 0) at::from_blob(out + offset, t.sizes(), t.options()).copy_(t);
    offset += int64_t(t.nbytes());
  }
}

// The message in the `bytes` at `in`, whose body and metadata Pack sized.
WireMessage Read(const char* in, int64_t bytes, int64_t body_bytes, int64_t meta_count, int src) {
  const int64_t metas_at = RoundUp8(body_bytes);
  int64_t offset = metas_at + meta_count * int64_t(sizeof(int64_t));
  if (body_bytes < 0 || meta_count < 0 || offset > bytes) {
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
    if (offset + int64_t(t.nbytes()) > bytes) {
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
    for (const c10::IValue& g : per_value.toTupleRef().elements()) {
      grads.push_back(g.isNone() ? at::Tensor() : g.toTensor());
    }
  }
  return message;
}

// A WireStream transfer's first bytes: what it holds, and sizes.
enum : int64_t { kMessage = 1, kGrow = 2 };
constexpr int64_t kHeaderWords = 4;  // kind, then body bytes, metadata entries, message bytes (kGrow: the new capacity)
constexpr int64_t kHeaderBytes = kHeaderWords * int64_t(sizeof(int64_t));

}  // namespace

void SendMessage(ProcessGroup& group, int dst, int tag, const WireMessage& message) {
  const Packed packed = Pack(message);
  at::Tensor buffer = at::empty({packed.Bytes()}, at::kByte);
  Write(packed, static_cast<char*>(buffer.data_ptr()));
  const std::vector<int64_t> sizes = {int64_t(packed.pickled.size()), int64_t(packed.metas.size()), buffer.numel()};
  group.Send(dst, tag, at::tensor(sizes, at::kLong));
  if (buffer.numel() > 0) group.Send(dst, tag, buffer);
}

WireMessage ReceiveMessage(ProcessGroup& group, int src, int tag) {
  at::Tensor sizes = at::empty({3}, at::kLong);
  group.Receive(src, tag, sizes);
  at::Tensor buffer = at::empty({sizes[2].item<int64_t>()}, at::kByte);
  if (buffer.numel() > 0) group.Receive(src, tag, buffer);
  return Read(static_cast<const char*>(buffer.data_ptr()), buffer.numel(), sizes[0].item<int64_t>(),
              sizes[1].item<int64_t>(), src);
}

WireStream::WireStream(ProcessGroup& group, int peer, int tag)
    : group_(group), peer_(peer), tag_(tag), buffer_(at::empty({kHeaderBytes}, at::kByte)) {}

void WireStream::Send(const WireMessage& message) {
  const Packed packed = Pack(message);
  const int64_t bytes = kHeaderBytes + packed.Bytes();
  if (bytes > buffer_.numel()) {  // the peer expects the old size: tell it the new one there
    int64_t* header = static_cast<int64_t*>(buffer_.data_ptr());
    std::fill(header, header + kHeaderWords, 0);
    header[0] = kGrow;
    header[1] = bytes;
    group_.Send(peer_, tag_, buffer_);
    buffer_ = at::empty({bytes}, at::kByte);
  }
  int64_t* header = static_cast<int64_t*>(buffer_.data_ptr());
  header[0] = kMessage;
  header[1] = int64_t(packed.pickled.size());
  header[2] = int64_t(packed.metas.size());
  header[3] = packed.Bytes();
  Write(packed, static_cast<char*>(buffer_.data_ptr()) + kHeaderBytes);
  group_.Send(peer_, tag_, buffer_);  // the rest of a larger buffer goes as it is
}

WireMessage WireStream::Receive() {
  group_.Receive(peer_, tag_, buffer_);
  const int64_t* header = static_cast<int64_t*>(buffer_.data_ptr());
  if (header[0] == kGrow) {
    if (header[1] <= buffer_.numel()) {
      throw InternalError(Concat("a message from rank ", peer_, " that does not add up"));
    }
    buffer_ = at::empty({header[1]}, at::kByte);
    group_.Receive(peer_, tag_, buffer_);
    header = static_cast<const int64_t*>(buffer_.data_ptr());
  }
  if (header[0] != kMessage || header[3] > buffer_.numel() - kHeaderBytes) {
    throw InternalError(Concat("a message from rank ", peer_, " that does not add up"));
  }
  return Read(static_cast<const char*>(buffer_.data_ptr()) + kHeaderBytes, header[3], header[1], header[2], peer_);
}

WireStream& WireStreams::At(int peer, int tag) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& stream = streams_[{peer, tag}];
  if (!stream) stream = std::make_unique<WireStream>(group_, peer, tag);
  return *stream;
}

}  // namespace mp
