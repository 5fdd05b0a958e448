// SplitRnnLayers: per recurrent op that may draw, one call per layer with a
// dropout between.
#include "planner/graph/split_rnn_layers.h"

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "planner/graph/seed_random_ops.h"

namespace mp {
namespace {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

bool IsRecurrent(const Node* node) {
  static const std::vector<std::string> kinds = {"aten::lstm", "aten::gru", "aten::rnn_tanh", "aten::rnn_relu"};
  const std::string kind = node->kind().toQualString();
  for (const auto& k : kinds) {
    if (kind == k) return node->maybeSchema() != nullptr;
  }
  return false;
}

size_t Arg(const Node* node, const char* name) {
  const auto index = node->schema().argumentIndexWithName(name);
  if (!index) throw InternalError(Concat(node->kind().toQualString(), " without its `", name, "` argument"));
  return *index;
}

int64_t ConstantInt(const Node* node, const char* name) {
  const auto value = torch::jit::toIValue(node->input(Arg(node, name)));
  if (value && value->isInt()) return value->toInt();
  if (value && value->isBool()) return value->toBool() ? 1 : 0;
  throw InputError(Concat("the model's ", node->kind().toQualString(), " takes `", name,
                          "` from a computed value; mpexec needs a constant there to draw its dropout between layers"));
}

Value* Insert(Graph& graph, const char* op, std::vector<torch::jit::NamedValue> args, const Node* like) {
  Value* out = graph.insert(c10::Symbol::fromQualString(op), args);
  out->node()->copyMetadata(const_cast<Node*>(like));
  return out;
}

void Split(Graph& graph, Node* node) {
  const int64_t layers = ConstantInt(node, "num_layers");
  const size_t p_at = Arg(node, "dropout");
  torch::jit::WithInsertPoint guard(node);
  if (layers <= 1) {  // ATen applies its dropout between layers only
    node->replaceInput(p_at, graph.insertConstant(0.0));
    return;
  }
  const int64_t dirs = ConstantInt(node, "bidirectional") ? 2 : 1;
  Node* weights = node->input(Arg(node, "params"))->node();
  if (weights->kind() != c10::prim::ListConstruct || weights->inputs().size() % size_t(layers * dirs) != 0) {
    throw InputError(Concat("the model's ", node->kind().toQualString(),
                            " takes its weights from a computed list; mpexec needs them listed to draw its dropout "
                            "between layers"));
  }
  const size_t per_layer = weights->inputs().size() / size_t(layers * dirs) * size_t(dirs);
  const size_t data_at = 0, hx_at = Arg(node, "hx"), params_at = Arg(node, "params");
  const size_t layers_at = Arg(node, "num_layers"), train_at = Arg(node, "train");
  Value* hx = node->input(hx_at);
  const bool hx_list = hx->type()->kind() == c10::TypeKind::ListType;
  std::vector<Value*> states;  // the initial states: lstm's h and c, the others' h
  if (hx_list) {
    for (int64_t i = 0; i < int64_t(node->outputs().size()) - 1; ++i) {
      states.push_back(Insert(graph, "aten::__getitem__", {hx, i}, node));
    }
  } else {
    states.push_back(hx);
  }
  Value* current = node->input(data_at);
  std::vector<std::vector<Value*>> finals(states.size());
  for (int64_t l = 0; l < layers; ++l) {
    std::vector<Value*> layer_states;
    for (Value* state : states) layer_states.push_back(Insert(graph, "aten::narrow", {state, 0, l * dirs, dirs}, node));
    Value* layer_hx = hx_list ? graph.insertNode(graph.createList(c10::TensorType::get(), layer_states))->output()
                              : layer_states[0];
    const auto from = weights->inputs().begin() + std::ptrdiff_t(size_t(l) * per_layer);
    Node* layer_weights = graph.insertNode(
        graph.createList(c10::TensorType::get(), std::vector<Value*>(from, from + std::ptrdiff_t(per_layer))));
    Node* call = graph.create(node->kind(), node->outputs().size());
    for (size_t i = 0; i < node->inputs().size(); ++i) {
      Value* in = node->input(i);
      if (i == data_at) in = current;
      if (i == hx_at) in = layer_hx;
      if (i == params_at) in = layer_weights->output();
      if (i == layers_at) in = graph.insertConstant(int64_t(1));
      if (i == p_at) in = graph.insertConstant(0.0);
      call->addInput(in);
    }
    for (size_t o = 0; o < node->outputs().size(); ++o) call->output(o)->setType(node->output(o)->type());
    call->copyMetadata(node);
    graph.insertNode(call);
    if (!call->maybeSchema()) {
      throw InternalError(Concat("a layer of ", node->kind().toQualString(), " matches no operator"));
    }
    current = call->output(0);
    if (l + 1 < layers) {
      current = Insert(graph, "aten::dropout", {current, node->input(p_at), node->input(train_at)}, node);
    }
    for (size_t s = 0; s < states.size(); ++s) finals[s].push_back(call->output(s + 1));
  }
  node->output(0)->replaceAllUsesWith(current);
  for (size_t s = 0; s < finals.size(); ++s) {
    Value* list = graph.insertNode(graph.createList(c10::TensorType::get(), finals[s]))->output();
    node->output(s + 1)->replaceAllUsesWith(Insert(graph, "aten::cat", {list, 0}, node));
  }
  node->destroy();
}

void CollectRecurrent(torch::jit::Block* block, std::vector<Node*>& out) {
  for (Node* node : block->nodes()) {
    for (torch::jit::Block* inner : node->blocks()) CollectRecurrent(inner, out);
    if (IsRecurrent(node) && !DrawsNothing(node)) out.push_back(node);
  }
}

}  // namespace

int SplitRnnLayers(Graph& graph) {
  std::vector<Node*> recurrent;
  CollectRecurrent(graph.block(), recurrent);
  for (Node* node : recurrent) Split(graph, node);
  return int(recurrent.size());
}

}  // namespace mp
