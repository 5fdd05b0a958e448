#include "planner/graph/saved_values.h"

#include <set>

namespace mp {
namespace {

// "aten::relu_" -> "relu"; "prim::ListConstruct" stays.
std::string BaseKind(const std::string& kind) {
  std::string base = kind.rfind("aten::", 0) == 0 ? kind.substr(6) : kind;
  if (base.size() > 1 && base.back() == '_' && base[base.size() - 2] != '_') base.pop_back();
  return base;
}

bool IsInPlace(const OpNode& node) {
  const std::string& k = node.kind;
  return node.mutates || (k.size() > 1 && k.back() == '_' && k[k.size() - 2] != '_');
}

// Outputs that alias their first input's storage.
const std::set<std::string> kViews = {
    "view",    "reshape", "flatten",   "unflatten", "transpose", "t",      "permute", "select", "slice",
    "narrow",  "unsqueeze", "squeeze", "expand",    "expand_as", "chunk",  "split",   "unbind", "contiguous",
    "detach",  "view_as", "reshape_as", "split_with_sizes", "unsafe_chunk", "unsafe_split", "alias",
    "movedim", "swapaxes", "as_strided"};

// Gradients that need none of the inputs (shapes and scalars at most).
const std::set<std::string> kSaveNothing = {
    "add", "sub", "rsub", "neg", "cat", "stack", "sum", "mean", "clone", "to", "type_as", "zeros_like",
    "ones_like", "size", "dim", "numel", "len", "Int", "Float", "floordiv", "eq", "ne", "gt", "lt", "ge", "le",
    "__and__", "__or__", "__not__", "__is__", "__isnot__", "__contains__", "bitwise_not", "masked_fill",
    "triu", "tril", "pad", "constant_pad_nd", "repeat", "flip", "roll", "upsample_nearest1d",
    "upsample_nearest2d", "upsample_nearest3d", "interpolate", "prim::Constant", "prim::device",
    "prim::dtype", "prim::Uninitialized", "prim::GetAttr", "prim::RaiseException", "prim::NumToTensor"};

// Gradients computed from the result (dropout keeps its scaled mask, the
// size of its output).
const std::set<std::string> kSaveOutput = {"relu",    "tanh",    "sigmoid",         "softmax",       "log_softmax",
                                           "exp",     "sqrt",    "rsqrt",           "elu",           "dropout",
                                           "feature_dropout",    "alpha_dropout",   "hardtanh",      "relu6",
                                           "lstm",    "gru"};

// Containers: an input is kept if what they make is.
const std::set<std::string> kForward = {"prim::ListConstruct", "prim::TupleConstruct", "prim::ListUnpack",
                                        "prim::TupleUnpack",   "prim::TupleIndex",     "__getitem__",
                                        "prim::unchecked_cast"};

// Products and quotients by a scalar keep only the scalar.
const std::set<std::string> kScalable = {"mul", "div", "true_divide"};

// Kept beyond their values: the argmax of each window, int64 beside float32.
const std::set<std::string> kKeepIndices = {"max_pool1d", "max_pool2d", "max_pool3d", "adaptive_max_pool1d",
                                            "adaptive_max_pool2d", "adaptive_max_pool3d"};

// The attention twin (seed_random_ops.cpp, LibTorch 2.x's attention with
// dropout) is a composite: autograd keeps its softmax weights, the dropout
// noise and the weights dropped, each [..., L, S] where its output is
// [..., L, Dv]: 3 S / Dv of the output beside its inputs (which stand for
// the scaled query and key it keeps). 0 where the shapes are not known.
double AttentionWeightsKept(const OpGraph& graph, const OpNode& node) {
  if (node.inputs.size() < 3) return 0;
  const std::vector<int64_t>& key = graph.values[node.inputs[1]].shape;
  const std::vector<int64_t>& value = graph.values[node.inputs[2]].shape;
  if (key.size() < 2 || value.empty() || value.back() <= 0) return 0;
  return 3.0 * double(key[key.size() - 2]) / double(value.back());
}

}  // namespace

SavedValues FindSavedValues(const OpGraph& graph) {
  SavedValues s;
  s.saved.assign(graph.values.size(), false);
  s.alias.assign(graph.values.size(), false);
  s.extra.assign(graph.nodes.size(), 0);
  // Readers come after their inputs' producers (canonical ids are in
  // program order), so walking the nodes backwards settles what a
  // container's or a view's outputs need before its inputs are asked.
  for (auto it = graph.nodes.rbegin(); it != graph.nodes.rend(); ++it) {
    const OpNode& node = *it;
    const std::string kind = BaseKind(node.kind);
    const bool view = kViews.count(kind) > 0;
    const bool in_place = IsInPlace(node);
    // A list or tuple, or what is taken out of one, is storage that some
    // other value already counts (a split's list and q, k, v of it).
    if ((view || in_place || kForward.count(kind)) && !node.inputs.empty()) {
      for (int out : node.outputs) s.alias[out] = true;
    }
    // Autograd records no node where no output takes a gradient (a frozen
    // backbone's layers, gradient_free.h): it keeps nothing there.
    bool recorded = node.outputs.empty();
    for (int out : node.outputs) recorded = recorded || !graph.values[out].gradient_free;
    if (!recorded) continue;
    if (kKeepIndices.count(kind)) s.extra[node.id] = 2;
    if (kind == "mp::scaled_dot_product_attention") s.extra[node.id] = AttentionWeightsKept(graph, node);
    if (kSaveOutput.count(kind)) {
      for (int out : node.outputs) s.saved[out] = true;
    }
    bool outputs_saved = false;
    for (int out : node.outputs) outputs_saved = outputs_saved || s.saved[out];
    // A saved alias keeps its base alive; a container passes the question on.
    const auto by_scalar = [&] {
      int tensors = 0;
      for (int in : node.inputs) tensors += graph.values[in].type == "Tensor" ? 1 : 0;
      return tensors < 2;
    };
    const bool keeps_inputs = kForward.count(kind) || view || in_place
                                  ? outputs_saved
                                  : !kSaveNothing.count(kind) && !kSaveOutput.count(kind) &&
                                        !(kScalable.count(kind) && by_scalar());
    if (!keeps_inputs) continue;
    for (int in : node.inputs) {
      if (!graph.values[in].is_param) s.saved[in] = true;
    }
  }
  return s;
}

void MarkSavedValues(OpGraph& graph) {
  const SavedValues saved = FindSavedValues(graph);
  for (auto& value : graph.values) {
    value.kept_for_backward = saved.saved[value.id];
    value.alias = saved.alias[value.id];
  }
  for (auto& node : graph.nodes) node.kept_extra = saved.extra[node.id];
}

}  // namespace mp
