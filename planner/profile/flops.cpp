// FLOP formulas per operator family. Conventions follow the usual
// model-FLOPs accounting (Kaplan et al. 2020; fvcore's and PyTorch's
// flop counters): a multiply-accumulate is 2 FLOPs, bias adds and
// activations inside heavy ops are ignored unless they dominate, and a
// matmul of [n,k] x [k,m] is 2nkm. Convolutions derive the work per
// output element from the weight ([Cout, Cin/groups, kh, kw]), so groups,
// stride and padding need no arguments. Bytes moved assume every input
// is read once and every output written once (the roofline's traffic).
#include "planner/profile/flops.h"

#include <set>

namespace mp {
namespace {

int64_t Product(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

int64_t NumelOf(const std::vector<ArgTensors>& args) {
  int64_t n = 0;
  for (const auto& arg : args)
    for (const auto& t : arg) n += t.Numel();
  return n;
}

double BytesOf(const std::vector<ArgTensors>& args) {
  double n = 0;
  for (const auto& arg : args)
    for (const auto& t : arg) n += double(t.Bytes());
  return n;
}

const TensorDims* Arg(const std::vector<ArgTensors>& args, size_t i) {
  return i < args.size() && !args[i].empty() ? &args[i][0] : nullptr;
}

bool EndsWith(const std::string& text, const std::string& tail) {
  return text.size() >= tail.size() && text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

// Ops that only rearrange metadata or build containers: no arithmetic,
// no traffic (the data they expose is counted where it is consumed).
bool IsFree(const std::string& kind) {
  static const std::set<std::string> free = {
      "aten::view", "aten::reshape", "aten::flatten", "aten::transpose", "aten::t",
      "aten::permute", "aten::select", "aten::slice", "aten::unsqueeze", "aten::squeeze",
      "aten::expand", "aten::expand_as", "aten::split", "aten::chunk", "aten::unbind",
      "aten::narrow", "aten::size", "aten::dim", "aten::detach", "aten::alias",
      "aten::as_strided", "aten::Int", "aten::Float", "aten::__getitem__", "aten::len",
      "aten::numel", "aten::dropout", "aten::feature_dropout", "aten::contiguous",
      "aten::view_as", "aten::reshape_as", "aten::unflatten", "aten::movedim"};
  return free.count(kind) > 0 || kind.rfind("prim::", 0) == 0;
}

double ConvFlops(const std::vector<ArgTensors>& inputs, const std::vector<ArgTensors>& outputs) {
  const TensorDims* weight = Arg(inputs, 1);
  const TensorDims* out = Arg(outputs, 0);
  if (!weight || !out || weight->sizes.empty()) return 0;
  const int64_t cout = weight->sizes[0];
  const double per_output = 2.0 * double(weight->Numel() / (cout ? cout : 1));
  return per_output * double(out->Numel());
}

// [..., n, k] x [..., k, m]: every output element is a k-long dot product.
double MatmulFlops(const TensorDims* a, const TensorDims* out) {
  if (!a || !out || a->sizes.empty()) return 0;
  const int64_t k = a->sizes.back();
  return 2.0 * double(k) * double(out->Numel());
}

// Each 2-D weight matrix of a recurrent layer multiplies every (time step,
// batch) row of its input once: rows = input numel / input feature size.
double RecurrentFlops(const TensorDims* input, const ArgTensors& params) {
  if (!input || input->sizes.empty()) return 0;
  const int64_t features = input->sizes.back();
  const double rows = double(input->Numel() / (features ? features : 1));
  double weights = 0;
  for (const auto& p : params)
    if (p.sizes.size() == 2) weights += double(p.Numel());
  return 2.0 * rows * weights;
}

}  // namespace

int64_t TensorDims::Numel() const { return Product(sizes); }

NodeWork EstimateWork(const std::string& kind, const std::vector<ArgTensors>& inputs,
                      const std::vector<ArgTensors>& outputs) {
  NodeWork work;
  if (IsFree(kind)) return work;
  work.bytes_moved = BytesOf(inputs) + BytesOf(outputs);
  const TensorDims* out = Arg(outputs, 0);
  const double out_numel = double(NumelOf(outputs));

  if (kind == "aten::conv1d" || kind == "aten::conv2d" || kind == "aten::conv3d" ||
      kind == "aten::_convolution" || kind == "aten::convolution" ||
      EndsWith(kind, "conv_transpose2d") || EndsWith(kind, "conv_transpose1d")) {
    work.flops = ConvFlops(inputs, outputs);
    if (EndsWith(kind, "conv_transpose2d") || EndsWith(kind, "conv_transpose1d")) {
      // Transposed: the weight is [Cin, Cout/groups, ...] and every input
      // element scatters into Cout/groups * kernel outputs.
      const TensorDims* in = Arg(inputs, 0);
      const TensorDims* weight = Arg(inputs, 1);
      if (in && weight && !weight->sizes.empty())
        work.flops = 2.0 * double(in->Numel()) * double(weight->Numel() / weight->sizes[0]);
    }
  } else if (kind == "aten::linear") {
    work.flops = MatmulFlops(Arg(inputs, 0), out);
    if (Arg(inputs, 2)) work.flops += double(out ? out->Numel() : 0);
  } else if (kind == "aten::matmul" || kind == "aten::mm" || kind == "aten::bmm") {
    work.flops = MatmulFlops(Arg(inputs, 0), out);
  } else if (kind == "aten::addmm" || kind == "aten::baddbmm" || kind == "aten::addbmm") {
    work.flops = MatmulFlops(Arg(inputs, 1), out) + double(out ? out->Numel() : 0);
  } else if (kind == "aten::scaled_dot_product_attention" || kind == "mp::scaled_dot_product_attention") {
    const TensorDims* q = Arg(inputs, 0);
    const TensorDims* k = Arg(inputs, 1);
    const TensorDims* v = Arg(inputs, 2);
    if (q && k && v && q->sizes.size() >= 2 && k->sizes.size() >= 2 && !v->sizes.empty()) {
      const double rows = double(q->Numel() / q->sizes.back());  // B*H*L
      const double s = double(k->sizes[k->sizes.size() - 2]);
      work.flops = 2.0 * rows * s * double(q->sizes.back())  // Q K^T
                   + 5.0 * rows * s                          // scale + softmax
                   + 2.0 * rows * s * double(v->sizes.back());  // (.) V
    }
  } else if (kind == "aten::_transformer_encoder_layer_fwd" || kind == "aten::_native_multi_head_attention") {
    // PyTorch's fused inference paths (nn.TransformerEncoderLayer's and
    // nn.MultiheadAttention's fast path): the projections as matrix
    // products of the rows through each weight, and attention's two
    // products over every query and key position.
    const bool layer = kind == "aten::_transformer_encoder_layer_fwd";
    const TensorDims* q = Arg(inputs, 0);
    const TensorDims* k = layer ? q : Arg(inputs, 1);
    if (q && k && q->sizes.size() == 3 && k->sizes.size() == 3) {
      const double width = double(q->sizes[2]), batch = double(q->sizes[0]);
      const double queries = double(q->sizes[1]), keys = double(k->sizes[1]);
      const auto weight = [&](size_t arg) { return Arg(inputs, arg) ? double(Arg(inputs, arg)->Numel()) : 0.0; };
      // in_proj (3E x E): a third for each of Q, K and V.
      const double qkv = weight(layer ? 3 : 5) / 3.0;
      work.flops = 2.0 * batch * (queries + 2.0 * keys) * qkv + 2.0 * batch * queries * weight(layer ? 5 : 7) +
                   4.0 * batch * queries * keys * width + 5.0 * batch * queries * keys;
      if (layer) work.flops += 2.0 * batch * queries * (weight(14) + weight(16)) + 10.0 * batch * queries * width;
    }
  } else if (kind == "aten::lstm" || kind == "aten::gru" || kind == "aten::rnn_tanh" ||
             kind == "aten::rnn_relu") {
    work.flops = inputs.size() > 2 ? RecurrentFlops(Arg(inputs, 0), inputs[2]) : 0;
  } else if (kind == "aten::lstm_cell" || kind == "aten::gru_cell") {
    ArgTensors weights;
    for (size_t i = 2; i < inputs.size(); ++i)
      if (const TensorDims* w = Arg(inputs, i)) weights.push_back(*w);
    work.flops = RecurrentFlops(Arg(inputs, 0), weights);
  } else if (kind == "aten::embedding" || kind == "aten::embedding_bag") {
    // A gather: rows of the table are copied, nothing is computed, and only
    // the rows looked up are read (not the whole table).
    work.flops = 0;
    const TensorDims* indices = Arg(inputs, 1);
    work.bytes_moved = 2.0 * BytesOf(outputs) + (indices ? double(indices->Bytes()) : 0);
  } else if (kind == "aten::batch_norm" || kind == "aten::layer_norm" ||
             kind == "aten::group_norm" || kind == "aten::instance_norm" ||
             kind == "aten::softmax" || kind == "aten::log_softmax") {
    // mean, variance (or max, sum), normalise, scale, shift: ~5 per element.
    work.flops = 5.0 * double(out ? out->Numel() : 0);
  } else if (kind == "aten::max_pool2d" || kind == "aten::avg_pool2d" ||
             kind == "aten::adaptive_avg_pool2d" || kind == "aten::max_pool1d" ||
             kind == "aten::adaptive_max_pool2d" || kind == "aten::mean" || kind == "aten::sum") {
    // Every input element is read and combined once.
    const TensorDims* in = Arg(inputs, 0);
    work.flops = double(in ? in->Numel() : 0);
  } else {
    work.flops = out_numel;  // elementwise
  }
  return work;
}

}  // namespace mp
