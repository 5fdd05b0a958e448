// UnrollForLoops (unroll_loops.h). A prim::Loop has inputs (trip count,
// start condition, carried values...), a body block with inputs (counter,
// carried values...) and outputs (continue condition, carried values...),
// and outputs (the carried values after the last iteration). For a `for`
// loop both conditions are a constant true, and when the trip count is a
// constant n the loop is n copies of its body chained through the carried
// values, which is what this pass writes in its place. LibTorch's own
// UnrollConstantLoops stops at 32 nodes a body; a transformer layer's body
// has hundreds, so the limit here is on the copies' total.
#include "planner/graph/unroll_loops.h"

#include <torch/csrc/jit/ir/constants.h>

#include <unordered_map>
#include <vector>

namespace mp {

namespace {

using torch::jit::Block;
using torch::jit::Node;
using torch::jit::Value;

bool ConstantTrue(Value* v) {
  const auto b = torch::jit::constant_as<bool>(v);
  return b && *b;
}

int64_t NodesIn(const Block* block) {
  int64_t n = 0;
  for (const Node* node : block->nodes()) {
    ++n;
    for (const Block* sub : node->blocks()) n += NodesIn(sub);
  }
  return n;
}

bool DefinedIn(const Value* v, const Node* loop) {
  for (const Node* n = v->node(); n; n = n->owningBlock()->owningNode())
    if (n == loop) return true;
  return false;
}

// Whether a node in `block` writes in place what the loop did not make
// (F.interpolate's `[scale for _ in range(dim)]` appends to a list made
// before its loop). Such a loop is bookkeeping, not layers worth cutting
// apart, and its copies would share that state across cuts: it stays
// whole. A layer's own lists and tensors are its own.
bool WritesOutside(const Block* block, const Node* loop) {
  for (const Node* node : block->nodes()) {
    for (const Block* sub : node->blocks())
      if (WritesOutside(sub, loop)) return true;
    const c10::FunctionSchema* schema = node->maybeSchema();
    if (!schema) continue;
    for (size_t i = 0; i < schema->arguments().size() && i < node->inputs().size(); ++i) {
      const c10::AliasInfo* alias = schema->arguments()[i].alias_info();
      if (alias && alias->isWrite() && !DefinedIn(node->input(i), loop)) return true;
    }
  }
  return false;
}

// The constant trip count of a `for` loop, or -1.
int64_t ForTripCount(Node* loop) {
  Block* body = loop->blocks().at(0);
  if (!ConstantTrue(loop->input(1)) || !ConstantTrue(body->outputs().at(0))) return -1;
  if (WritesOutside(body, loop)) return -1;
  const auto trips = torch::jit::constant_as<int64_t>(loop->input(0));
  return trips ? std::max<int64_t>(*trips, 0) : -1;
}

void Unroll(torch::jit::Graph& graph, Node* loop, int64_t trips) {
  Block* body = loop->blocks().at(0);
  std::vector<Value*> carried(loop->inputs().begin() + 2, loop->inputs().end());
  torch::jit::WithInsertPoint before(loop);
  for (int64_t k = 0; k < trips; ++k) {
    std::unordered_map<Value*, Value*> map;
    map[body->inputs().at(0)] = graph.insertConstant(k);
    for (size_t c = 0; c < carried.size(); ++c) map[body->inputs().at(c + 1)] = carried[c];
    const auto lookup = [&](Value* v) {
      auto it = map.find(v);
      return it == map.end() ? v : it->second;  // defined outside the body
    };
    for (Node* node : body->nodes()) {
      Node* copy = graph.insertNode(graph.createClone(node, lookup));
      for (size_t o = 0; o < node->outputs().size(); ++o) map[node->output(o)] = copy->output(o);
    }
    for (size_t c = 0; c < carried.size(); ++c) carried[c] = lookup(body->outputs().at(c + 1));
  }
  for (size_t c = 0; c < carried.size(); ++c) loop->output(c)->replaceAllUsesWith(carried[c]);
  loop->destroy();
}

}  // namespace

int UnrollForLoops(torch::jit::Graph& graph, int64_t max_nodes) {
  int unrolled = 0;
  int64_t budget = max_nodes;
  for (bool changed = true; changed;) {
    changed = false;
    for (Node* node : graph.block()->nodes()) {
      if (node->kind() != c10::prim::Loop) continue;
      const int64_t trips = ForTripCount(node);
      const int64_t added = trips * NodesIn(node->blocks().at(0));
      if (trips < 0 || added > budget) continue;
      Unroll(graph, node, trips);
      budget -= added;
      ++unrolled;
      changed = true;
      break;  // the node list changed
    }
  }
  return unrolled;
}

}  // namespace mp
