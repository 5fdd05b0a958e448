// SplitBackward: walk the graph, hook the intermediates, run I; W from the
// kept gradients.
#include "planner/graph/split_backward.h"

#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace mp {

namespace ag = torch::autograd;

struct SplitBackward::Group {
  std::shared_ptr<ag::Node> node;     // the intermediate
  std::vector<uint32_t> outside;      // its edges that lead out of L
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

// A node whose input gradient is made of what its weights' gradients are (a
// normalisation in training: per-channel sums of dy and dy * xhat). Asked
// for its input gradient alone it costs nearly its whole backward, and W
// would make the sums again (MobileNetV2's batch norms at 8 samples: I + W
// 1.75x B), so I computes its weights' gradients with it.
bool MakesWeightsWithInputs(const ag::Node& node) {
  const std::string name = node.name();
  for (const char* kind : {"NativeBatchNormBackward", "CudnnBatchNormBackward", "MiopenBatchNormBackward",
                           "NativeLayerNormBackward", "NativeGroupNormBackward"}) {
    if (name.rfind(kind, 0) == 0) return true;
  }
  return false;
}

// W's stand-in for an intermediate: the intermediate's own backward, with
// edges only to what lies outside L. The engine walks and runs what is
// reachable from where it starts, and from here that is the weight side
// alone; the intermediate itself, asked from inside that walk, computes only
// the outputs whose edges the walk found needed (task_should_compute_output),
// so not the input gradients again. It takes the intermediate's sequence
// number, hence its place in the engine's order (later nodes first): a new
// node's number put every stand-in before every weight's transpose and
// accumulation, so the stage's weight gradients were all computed, and
// held, before any was added into .grad (the zoo MLP's W, 16 layers as one
// stage at 8 samples, 7.9 ms against its B's 5.0; now 4.0).
struct WeightSide : ag::Node {
  WeightSide(std::shared_ptr<ag::Node> node, const std::vector<uint32_t>& outside,
             const std::vector<at::Tensor>& grads)
      : ag::Node(node->sequence_nr()), node_(std::move(node)), outside_(outside) {
    for (uint32_t j : outside_) add_next_edge(node_->next_edge(j));
    for (const at::Tensor& g : grads) {
      if (g.defined()) {
        add_input_metadata(g);
      } else {
        add_input_metadata(ag::Node::undefined_input());
      }
    }
  }
  ag::variable_list apply(ag::variable_list&& grads) override {
    ag::variable_list all = (*node_)(std::move(grads));
    ag::variable_list out;
    for (uint32_t j : outside_) out.push_back(all.at(j));
    return out;
  }
  std::shared_ptr<ag::Node> node_;
  std::vector<uint32_t> outside_;
};

}  // namespace

SplitBackward::SplitBackward(std::vector<at::Tensor> roots, std::vector<at::Tensor> seeds,
                             const std::vector<at::Tensor>& leaves, const std::vector<at::Tensor>& params)
    : roots_(std::move(roots)), seeds_(std::move(seeds)) {
  if (roots_.empty()) return;
  if (leaves.empty()) {  // nothing for I; W is the whole backward, run as B runs it
    whole_ = true;
    return;
  }
  // A tensor holds its accumulator weakly: the one of a leaf no op of the
  // stage used (a received tensor passed on as it is), or of a parameter
  // the stage hands on as it is (nn.EmbeddingBag's argument swap passes its
  // weight through a prim::If, and a cut there sends the weight), was made
  // by the walk below and freed at once, its address free for the next
  // node made. A later accumulator at that address then read as a leaf's:
  // DLRM's table under dualpipev went into L, and neither I nor W summed
  // the gradient the next stage sent for it (its .grad 1 off). So the
  // leaves' and the leaf roots' accumulators are made and held first.
  std::vector<std::shared_ptr<ag::Node>> accumulators;
  std::unordered_set<const ag::Node*> targets;  // the leaves' accumulators
  for (const at::Tensor& leaf : leaves) {
    accumulators.push_back(ag::impl::gradient_edge(leaf).function);
    targets.insert(accumulators.back().get());
  }
  for (const at::Tensor& root : roots_) {
    if (root.is_leaf() && root.requires_grad()) accumulators.push_back(ag::impl::gradient_edge(root).function);
  }
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
  // Parameters whose every use is by such a node of L: I computes their
  // gradients, and W leaves them alone.
  std::unordered_map<const ag::Node*, bool> with_inputs;  // accumulator -> every parent makes it with I
  for (ag::Node* node : order) {
    const bool makes = in_l[node] && MakesWeightsWithInputs(*node);
    for (const ag::Edge& e : node->next_edges()) {
      if (!param_of.count(e.function.get())) continue;
      auto [it, fresh] = with_inputs.emplace(e.function.get(), makes);
      if (!fresh) it->second = it->second && makes;
    }
  }
  std::vector<at::Tensor> in_i = leaves;  // what I accumulates into .grad
  for (const auto& [acc, makes] : with_inputs) {
    if (!makes) continue;
    in_i.push_back(*param_of.at(acc));
    param_of.erase(acc);
  }
  // Outside L, the nodes that lead to a parameter; `order` has children
  // first. An intermediate is a node of L with an edge to one of them: W
  // starts there, and at the roots outside L (what I never ran).
  std::unordered_set<const ag::Node*> to_param;
  for (ag::Node* node : order) {
    if (in_l[node]) continue;
    bool reaches = param_of.count(node) > 0;
    for (const ag::Edge& e : node->next_edges()) reaches = reaches || (e.function && to_param.count(e.function.get()));
    if (reaches) to_param.insert(node);
  }
  for (ag::Node* node : order) {
    if (!in_l[node]) continue;
    std::vector<uint32_t> outside;
    for (uint32_t j = 0; j < node->next_edges().size(); ++j) {
      if (to_param.count(node->next_edges()[j].function.get())) outside.push_back(j);
    }
    if (outside.empty()) continue;
    auto group = std::make_shared<Group>();
    group->node = node->shared_from_this();
    group->outside = std::move(outside);
    auto kept = std::shared_ptr<std::vector<at::Tensor>>(group, &group->grads);
    group->node->add_pre_hook(std::make_unique<Keep>(kept));
    groups_.push_back(std::move(group));
  }
  for (size_t r = 0; r < roots_.size(); ++r) {
    const ag::Edge edge = ag::impl::gradient_edge(roots_[r]);
    if (to_param.count(edge.function.get())) outside_roots_.push_back({edge, seeds_[r]});
  }
  for (const auto& [acc, param] : param_of) {
    if (to_param.count(acc)) to_.push_back(ag::impl::gradient_edge(*param));
  }
  // I. W starts from the intermediates and the roots outside L, so the
  // roots and their seeds (the gradients the stage received) go now.
  ag::backward(roots_, seeds_, /*retain_graph=*/true, /*create_graph=*/false, in_i);
  roots_.clear();
  seeds_.clear();
}

// The stand-ins W starts from; each walks its weight side only.
std::vector<std::shared_ptr<ag::Node>> SplitBackward::Starts() const {
  std::vector<std::shared_ptr<ag::Node>> starts;
  for (const auto& group : groups_) {
    starts.push_back(std::make_shared<WeightSide>(group->node, group->outside, group->grads));
  }
  return starts;
}

int64_t SplitBackward::WalkedNodes() const {
  std::vector<const ag::Node*> walk;
  std::unordered_set<const ag::Node*> seen;
  const auto starts = Starts();
  for (const auto& start : starts) {
    walk.push_back(start.get());
    seen.insert(start.get());
  }
  int64_t walked = 0;
  while (!walk.empty()) {
    const ag::Node* node = walk.back();
    walk.pop_back();
    ++walked;
    for (const ag::Edge& e : node->next_edges()) {
      if (e.function && seen.insert(e.function.get()).second) walk.push_back(e.function.get());
    }
  }
  return walked;
}

int64_t SplitBackward::HeldBytes() const {
  // Per storage, its views' bytes up to its own: a cat's backward hands each
  // input a slice of one gradient, and a node given its slice holds that
  // (Branchy's Inception branches were charged the whole cat 4 times); an
  // LSTM's gates' gradient reaches W whole and in slices, held once.
  std::unordered_set<const void*> seen;
  std::unordered_map<const void*, std::pair<int64_t, int64_t>> storages;  // views' bytes, its own
  for (const auto& group : groups_) {
    for (const at::Tensor& grad : group->grads) {
      if (!grad.defined() || !grad.has_storage() || !seen.insert(grad.unsafeGetTensorImpl()).second) continue;
      auto& [views, own] = storages[grad.storage().unsafeGetStorageImpl()];
      views += int64_t(grad.numel()) * int64_t(grad.element_size());
      own = int64_t(grad.storage().nbytes());
    }
  }
  int64_t bytes = 0;
  for (const auto& [storage, sizes] : storages) bytes += std::min(sizes.first, sizes.second);
  return bytes;
}

void SplitBackward::Weights() {
  if (whole_) {
    if (!roots_.empty()) ag::backward(roots_, seeds_);
    roots_.clear();
    seeds_.clear();
    return;
  }
  // One engine call from every stand-in and every root outside L: none of
  // them reaches L, so nothing of I runs again, and a parameter reached
  // from several (a weight used at every step of a loop, or tied) gets the
  // sum, as in B.
  const auto starts = Starts();
  ag::edge_list from;
  ag::variable_list grads;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const auto& group = groups_[g];
    for (size_t i = 0; i < group->grads.size(); ++i) {
      if (!group->grads[i].defined()) continue;  // nothing reached it there
      from.emplace_back(starts[g], uint32_t(i));
      grads.push_back(group->grads[i]);
    }
  }
  for (const auto& [edge, seed] : outside_roots_) {
    from.push_back(edge);
    grads.push_back(seed);
  }
  if (!from.empty() && !to_.empty()) {
    // W is the graph's last use: each node it runs may free what it saved
    // at once, as B's do.
    ag::Engine::get_default_engine().execute(from, grads, /*keep_graph=*/false, /*create_graph=*/false,
                                              /*accumulate_grad=*/true, to_);
  }
  groups_.clear();
  outside_roots_.clear();
  to_.clear();
  roots_.clear();
  seeds_.clear();
}

}  // namespace mp
