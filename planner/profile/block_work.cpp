// BlockWork (block_work.h): a small interpreter for prim::If and prim::Loop
// over NodeProgram, which runs each block-less node alone. The values of
// the blocks live in a map keyed by the graph's values; a loop's body
// reads its counter and carried values from its block inputs. The walk
// runs on copies of what it reads from outside, so what it runs again (an
// in-place write, an append, a random draw) leaves the caller's values as
// they were.
#include "planner/profile/block_work.h"

#include <unordered_map>

#include "planner/graph/node_program.h"
#include "planner/graph/run_graph.h"

namespace mp {

namespace {

using torch::jit::Block;
using torch::jit::Node;
using torch::jit::Value;

class BlockWalker {
 public:
  BlockWalker(const std::function<c10::IValue(const Value*)>& outer, int max_runs)
      : outer_(outer), runs_left_(max_runs) {}

  // False where the walk cannot go on (see BlockWork).
  bool Walk(const Node* node) { return RunNode(node); }
  const NodeWork& Work() const { return work_; }

 private:
  // What the walk reads from outside the node is copied first, containers
  // and tensors: it runs the node's writes again (F.interpolate appends its
  // scales to a list made outside its loop), and the caller's values must
  // stay as the node left them.
  c10::IValue Get(const Value* v) {
    if (v->node()->kind() == c10::prim::Constant) return torch::jit::toIValue(v).value();
    auto it = env_.find(v);
    if (it != env_.end()) return it->second;
    return env_[v] = MapTensors(outer_(v), [](const at::Tensor& t) { return t.clone(); });
  }

  bool RunBlock(const Block* block) {
    for (const Node* node : block->nodes())
      if (!RunNode(node)) return false;
    return true;
  }

  bool RunNode(const Node* node) {
    if (--runs_left_ < 0) return false;
    if (node->kind() == c10::prim::Constant) return true;  // Get reads it
    if (node->kind() == c10::prim::If) {
      const Block* taken = node->blocks().at(Get(node->input(0)).toBool() ? 0 : 1);
      if (!RunBlock(taken)) return false;
      for (size_t o = 0; o < node->outputs().size(); ++o) env_[node->output(o)] = Get(taken->outputs()[o]);
      return true;
    }
    if (node->kind() == c10::prim::Loop) {
      const Block* body = node->blocks().at(0);
      const int64_t trips = Get(node->input(0)).toInt();
      bool go = Get(node->input(1)).toBool();
      std::vector<c10::IValue> carried;
      for (size_t c = 2; c < node->inputs().size(); ++c) carried.push_back(Get(node->input(c)));
      for (int64_t k = 0; k < trips && go; ++k) {
        env_[body->inputs()[0]] = k;
        for (size_t c = 0; c < carried.size(); ++c) env_[body->inputs()[c + 1]] = carried[c];
        if (!RunBlock(body)) return false;
        go = Get(body->outputs()[0]).toBool();
        for (size_t c = 0; c < carried.size(); ++c) carried[c] = Get(body->outputs()[c + 1]);
      }
      for (size_t c = 0; c < carried.size(); ++c) env_[node->output(c)] = carried[c];
      return true;
    }
    if (!node->blocks().empty()) return false;
    auto it = programs_.find(node);
    if (it == programs_.end()) it = programs_.emplace(node, std::make_unique<NodeProgram>(node)).first;
    std::vector<c10::IValue> args;
    for (const Value* in : it->second->Inputs()) args.push_back(Get(in));
    std::vector<ArgTensors> in_dims, out_dims;
    for (const Value* in : node->inputs()) in_dims.push_back(DimsOf(Get(in)));  // before the node writes any
    const std::vector<c10::IValue> outputs = it->second->Run(std::move(args));
    for (size_t o = 0; o < outputs.size(); ++o) {
      env_[node->output(o)] = outputs[o];
      out_dims.push_back(DimsOf(outputs[o]));
    }
    const NodeWork work = EstimateWork(node->kind().toQualString(), in_dims, out_dims);
    work_.flops += work.flops;
    work_.bytes_moved += work.bytes_moved;
    return true;
  }

  const std::function<c10::IValue(const Value*)>& outer_;
  int runs_left_;
  std::unordered_map<const Value*, c10::IValue> env_;
  std::unordered_map<const Node*, std::unique_ptr<NodeProgram>> programs_;
  NodeWork work_;
};

}  // namespace

ArgTensors DimsOf(const c10::IValue& value) {
  ArgTensors dims;
  for (const auto& t : FlattenTensors(value))
    if (t.defined()) dims.push_back({t.sizes().vec(), static_cast<int64_t>(t.element_size())});
  return dims;
}

std::optional<NodeWork> BlockWork(const Node* node, const std::function<c10::IValue(const Value*)>& outer,
                                  int max_runs) {
  BlockWalker walker(outer, max_runs);
  try {
    if (!walker.Walk(node)) return std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;  // a node that will not run alone (or raises on these values)
  }
  return walker.Work();
}

}  // namespace mp
