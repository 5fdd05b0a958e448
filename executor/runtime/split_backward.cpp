// SplitBackward: walk the graph, hook the intermediates, run I; W from the
// kept gradients.
#include "executor/runtime/split_backward.h"

#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace mp {

namespace ag = torch::autograd;

struct SplitBackward::Group {
  std::shared_ptr<ag::Node> node;     // the intermediate
  std::vector<at::Tensor> params;     // reached from it outside L, and from no other intermediate
  std::vector<at::Tensor> grads;      // what reached it during I
};

namespace {

// Keeps the gradients that reach a node.
struct Keep : ag::FunctionPreHook {
  explicit Keep(std::weak_ptr<std::vector<at::Tensor>> into) : into_(std::move(into)) {}
  ag::variable_list operator()(const ag::variable_list& grads) override {
    if (auto into = into_.lock()) *into = grads;
    return grads;
  }
  std::weak_ptr<std::vector<at::Tensor>> into_;
};

}  // namespace

SplitBackward::SplitBackward(std::vector<at::Tensor> roots, std::vector<at::Tensor> seeds,
                             const std::vector<at::Tensor>& leaves, const std::vector<at::Tensor>& params)
    : roots_(std::move(roots)), seeds_(std::move(seeds)) {
  if (roots_.empty()) return;
  std::unordered_set<const ag::Node*> targets;  // the leaves' accumulators
  for (const at::Tensor& leaf : leaves) targets.insert(ag::impl::gradient_edge(leaf).function.get());
  std::unordered_map<const ag::Node*, const at::Tensor*> param_of;
  for (const at::Tensor& p : params) {
    if (auto acc = ag::impl::try_get_grad_accumulator(p)) param_of[acc.get()] = &p;
  }
  // L: the nodes from which a leaf is reachable (memoised depth-first walk;
  // iterative, since graphs can be thousands of nodes deep).
  std::unordered_map<const ag::Node*, bool> in_l;
  std::vector<ag::Node*> order;  // every node reached from the roots, children first
  {
    std::vector<std::pair<ag::Node*, size_t>> stack;
    std::unordered_set<const ag::Node*> seen;
    for (const at::Tensor& root : roots_) {
      ag::Node* start = ag::impl::gradient_edge(root).function.get();
      if (!start || !seen.insert(start).second) continue;
      stack.push_back({start, 0});
      while (!stack.empty()) {
        auto& [node, next] = stack.back();
        if (next < node->next_edges().size()) {
          ag::Node* child = node->next_edges()[next++].function.get();
          if (child && seen.insert(child).second) stack.push_back({child, 0});
          continue;
        }
        bool reaches = targets.count(node) > 0;
        for (const ag::Edge& e : node->next_edges()) reaches = reaches || (e.function && in_l[e.function.get()]);
        in_l[node] = reaches;
        order.push_back(node);
        stack.pop_back();
      }
    }
  }
  // The parameters each intermediate reaches outside L.
  std::map<const at::Tensor*, std::set<ag::Node*>> owners;
  std::map<ag::Node*, std::vector<const at::Tensor*>> owned;
  for (ag::Node* node : order) {
    if (!in_l[node]) continue;
    std::vector<ag::Node*> walk;
    std::unordered_set<const ag::Node*> visited;
    auto push_children_outside_l = [&](const ag::Node* n) {
      for (const ag::Edge& e : n->next_edges()) {
        ag::Node* child = e.function.get();
        if (child && !in_l[child] && visited.insert(child).second) walk.push_back(child);
      }
    };
    push_children_outside_l(node);
    while (!walk.empty()) {
      ag::Node* n = walk.back();
      walk.pop_back();
      if (auto p = param_of.find(n); p != param_of.end()) {
        owners[p->second].insert(node);
        owned[node].push_back(p->second);
      }
      push_children_outside_l(n);
    }
  }
  std::set<const at::Tensor*> grouped;
  for (auto& [node, list] : owned) {
    auto group = std::make_shared<Group>();
    for (const at::Tensor* p : list) {
      if (owners[p].size() == 1) group->params.push_back(*p), grouped.insert(p);
    }
    if (group->params.empty()) continue;
    group->node = node->shared_from_this();
    auto kept = std::shared_ptr<std::vector<at::Tensor>>(group, &group->grads);
    group->node->add_pre_hook(std::make_unique<Keep>(kept));
    groups_.push_back(std::move(group));
  }
  for (const at::Tensor& p : params) {
    if (!grouped.count(&p)) rest_.push_back(p);
  }
  // I.
  if (leaves.empty()) return;
  const std::vector<at::Tensor> grads =
      ag::grad(roots_, leaves, seeds_, /*retain_graph=*/true, /*create_graph=*/false, /*allow_unused=*/true);
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (grads[i].defined()) at::Tensor(leaves[i]).mutable_grad() = grads[i];
  }
}

int64_t SplitBackward::WalkedNodes() const {
  int64_t walked = 0;
  for (const auto& group : groups_) {
    std::vector<const ag::Node*> walk{group->node.get()};
    std::unordered_set<const ag::Node*> seen{group->node.get()};
    while (!walk.empty()) {
      const ag::Node* node = walk.back();
      walk.pop_back();
      ++walked;
      for (const ag::Edge& e : node->next_edges()) {
        if (e.function && seen.insert(e.function.get()).second) walk.push_back(e.function.get());
      }
    }
  }
  return walked;
}

void SplitBackward::Weights() {
  for (const auto& group : groups_) {
    ag::edge_list from;
    ag::variable_list grads;
    for (size_t i = 0; i < group->grads.size(); ++i) {
      if (!group->grads[i].defined()) continue;
      from.emplace_back(group->node, uint32_t(i));
      grads.push_back(group->grads[i]);
    }
    if (from.empty()) continue;  // nothing reached it: its parameters get no gradient
    ag::edge_list to;
    for (const at::Tensor& p : group->params) to.push_back(ag::impl::gradient_edge(p));
    ag::Engine::get_default_engine().execute(from, grads, /*keep_graph=*/true, /*create_graph=*/false,
                                              /*accumulate_grad=*/true, to);
    group->grads.clear();
  }
  if (!rest_.empty()) {
    ag::backward(roots_, seeds_, /*retain_graph=*/true, /*create_graph=*/false, rest_);
  }
  groups_.clear();
  roots_.clear();
  seeds_.clear();
}

}  // namespace mp
