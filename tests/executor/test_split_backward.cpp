// SplitBackward (I then W) gives the gradients one backward gives, on small
// graphs with the shapes that matter: a linear layer (its weight reached
// through a transpose), a weight used twice, parameters not on the path to
// the stage's inputs, and a stage whose inputs need no gradient at all; and
// on zoo models, what W walks and computes.
#include "tests/doctest_torch.h"

#include <torch/torch.h>
#include <torch/csrc/autograd/function.h>

#include <set>

#include "planner/graph/split_backward.h"
#include "planner/graph/canonical_graph.h"
#include "planner/graph/model_file.h"
#include "planner/graph/run_graph.h"
#include "../graph/zoo.h"

namespace {

struct Net {
  at::Tensor w1 = torch::randn({8, 8}, torch::requires_grad());
  at::Tensor b1 = torch::randn({8}, torch::requires_grad());
  at::Tensor w2 = torch::randn({8, 8}, torch::requires_grad());
  at::Tensor side = torch::randn({8}, torch::requires_grad());  // on no path to the input
  std::vector<at::Tensor> Params() const { return {w1, b1, w2, side}; }

  // x (the received tensor) -> linear -> tanh -> linear with w2 -> + linear
  // with w2 again (w2 shared) -> + side; the loss is the sum of squares.
  at::Tensor Loss(const at::Tensor& x) const {
    const at::Tensor h = torch::tanh(torch::nn::functional::linear(x, w1, b1));
    const at::Tensor y = torch::matmul(h, w2.t()) + torch::matmul(torch::relu(h), w2) + side * side.sum();
    return (y * y).sum();
  }
};

void Zero(const std::vector<at::Tensor>& tensors) {
  for (const at::Tensor& t : tensors) {
    if (t.grad().defined()) t.mutable_grad().zero_();
  }
}

}  // namespace

TEST_CASE("I then W gives the gradients of one backward") {
  torch::manual_seed(3);
  const Net net;
  for (bool input_needs_grad : {true, false}) {
    CAPTURE(input_needs_grad);
    const at::Tensor x0 = torch::randn({4, 8});
    Zero(net.Params());
    const at::Tensor x = x0.clone().requires_grad_(input_needs_grad);
    net.Loss(x).backward();
    std::vector<at::Tensor> want;
    for (const at::Tensor& p : net.Params()) want.push_back(p.grad().clone());
    const at::Tensor want_x = input_needs_grad ? x.grad().clone() : at::Tensor();

    Zero(net.Params());
    const at::Tensor leaf = x0.clone().requires_grad_(input_needs_grad);
    const at::Tensor loss = net.Loss(leaf);
    std::vector<at::Tensor> leaves;
    if (input_needs_grad) leaves.push_back(leaf);
    mp::SplitBackward split({loss}, {torch::ones_like(loss)}, leaves, net.Params());
    if (input_needs_grad) {
      REQUIRE(leaf.grad().defined());
      CHECK(torch::allclose(leaf.grad(), want_x));
      for (const at::Tensor& p : net.Params()) CHECK(!(p.grad().defined() && p.grad().abs().sum().item<double>() > 0));
    }
    split.Weights();
    for (size_t i = 0; i < want.size(); ++i) {
      CAPTURE(i);
      CHECK(torch::allclose(net.Params()[i].grad(), want[i], 1e-5, 1e-6));
    }
  }
}

TEST_CASE("W accumulates into .grad across micro-batches, as B does") {
  torch::manual_seed(4);
  const Net net;
  const at::Tensor a = torch::randn({2, 8}), b = torch::randn({2, 8});
  Zero(net.Params());
  net.Loss(a.clone().requires_grad_()).backward();
  net.Loss(b.clone().requires_grad_()).backward();
  std::vector<at::Tensor> want;
  for (const at::Tensor& p : net.Params()) want.push_back(p.grad().clone());
  Zero(net.Params());
  for (const at::Tensor& x : {a, b}) {
    const at::Tensor leaf = x.clone().requires_grad_();
    const at::Tensor loss = net.Loss(leaf);
    mp::SplitBackward split({loss}, {torch::ones_like(loss)}, {leaf}, net.Params());
    split.Weights();
  }
  for (size_t i = 0; i < want.size(); ++i) CHECK(torch::allclose(net.Params()[i].grad(), want[i], 1e-5, 1e-6));
}

TEST_CASE("a parameter the stage hands on as it is gets the gradient the next stage sends for it, as in B") {
  // nn.EmbeddingBag's argument swap passes its weight through a prim::If;
  // a cut there makes the weight itself one of the stage's outputs (DLRM
  // under dualpipev). Handed on alone (no accumulator yet) and used in the
  // stage as well; beside a received tensor the stage hands on as it is
  // (a leaf no op used: its accumulator, made and freed by the walk, left
  // its address to the table's, which then read as a leaf's).
  torch::manual_seed(5);
  for (bool used_here : {false, true}) {
    for (bool input_needs_grad : {true, false}) {
      CAPTURE(used_here);
      CAPTURE(input_needs_grad);
      const at::Tensor w = torch::randn({8, 8}, torch::requires_grad());
      const at::Tensor table = torch::randn({8, 8}, torch::requires_grad());
      const at::Tensor x0 = torch::randn({4, 8}), gy = torch::randn({4, 8}), gt = torch::randn({8, 8});
      const at::Tensor gz = torch::randn({4, 8});
      const auto forward = [&](const at::Tensor& x) {
        at::Tensor y = torch::matmul(x, w);
        if (used_here) y = y + torch::matmul(x, table);
        return y;
      };
      const at::Tensor x = x0.clone().requires_grad_(input_needs_grad);
      torch::autograd::backward({forward(x), table}, {gy, gt});
      const at::Tensor want_w = w.grad().clone(), want_table = table.grad().clone();
      w.mutable_grad() = at::Tensor();
      table.mutable_grad() = at::Tensor();

      const at::Tensor leaf = x0.clone().requires_grad_(input_needs_grad);
      const at::Tensor passed_on = x0.clone().requires_grad_(input_needs_grad);
      std::vector<at::Tensor> roots = {forward(leaf), table}, seeds = {gy, gt}, leaves;
      if (input_needs_grad) {
        leaves = {passed_on, leaf};
        roots.push_back(passed_on);
        seeds.push_back(gz);
      }
      mp::SplitBackward split(roots, seeds, leaves, {w, table});
      if (input_needs_grad) {
        REQUIRE(passed_on.grad().defined());
        CHECK(torch::equal(passed_on.grad(), gz));
      }
      split.Weights();
      REQUIRE(table.grad().defined());
      CHECK(torch::allclose(table.grad(), want_table, 1e-5, 1e-6));
      CHECK(torch::allclose(w.grad(), want_w, 1e-5, 1e-6));
    }
  }
}

// W's one engine call starts from stand-ins that reach only the weight
// side, so it walks a part of the graph, once: starting the engine at each
// weight-consuming node walked the whole stage below each one (680 nodes
// for the MLP's graph, 16,301 for MobileNetV2's), more than the graph
// itself. The whole model as one stage whose input takes a gradient, on a
// chain (the MLP), convolutions with batch norm (the ConvNet) and
// torchvision's MobileNetV2; its gradients as one backward gives them.
TEST_CASE("W walks the weight side once, not the stage below every weight") {
  for (const std::string name : {"mlp.script.pt", "convnet.script.pt", "heldout/mobilenet_v2.script.pt"}) {
    CAPTURE(name);
    mp::ModelFile file = mp::LoadModelFile(mp::test::ZooPath(name));
    mp::CanonicalOptions canonical_options;
    canonical_options.training = true;
    const mp::CanonicalGraph canonical = mp::Canonicalize(file.module, canonical_options);
    std::vector<c10::IValue> inputs = mp::SyntheticInputs(mp::WithBatch(file.input_spec, 2));
    std::vector<c10::IValue> stack = canonical.Stack(inputs);
    std::vector<at::Tensor> params;
    for (size_t i = canonical.num_model_inputs; i < stack.size(); ++i) {
      at::Tensor p = stack[i].toTensor();
      if (p.is_floating_point() && canonical.params[i - canonical.num_model_inputs].tensor.requires_grad()) {
        p = p.detach().requires_grad_(true);
        params.push_back(p);
      }
      stack[i] = p;
    }
    auto loss_of = [&](const at::Tensor& x) {
      std::vector<c10::IValue> run = stack;
      run[0] = x;
      return mp::FlattenTensors(mp::GraphRunner(canonical.graph).Run(run).at(0)).at(0).sum();
    };
    const at::Tensor x0 = inputs.at(0).toTensor();
    // One backward, for the gradients W must equal.
    const at::Tensor x1 = x0.clone().requires_grad_(true);
    loss_of(x1).backward();
    std::vector<at::Tensor> want;
    for (const at::Tensor& p : params) want.push_back(p.grad().clone());
    Zero(params);

    const at::Tensor x = x0.clone().requires_grad_(true);
    const at::Tensor loss = loss_of(x);
    int64_t graph_nodes = 0;  // the autograd graph the loss was built with
    {
      std::vector<const torch::autograd::Node*> walk{loss.grad_fn().get()};
      std::set<const torch::autograd::Node*> seen{walk.front()};
      while (!walk.empty()) {
        const torch::autograd::Node* node = walk.back();
        walk.pop_back();
        ++graph_nodes;
        for (const auto& e : node->next_edges()) {
          if (e.function && seen.insert(e.function.get()).second) walk.push_back(e.function.get());
        }
      }
    }
    mp::SplitBackward split({loss}, {torch::ones_like(loss)}, {x}, params);
    const int64_t walked = split.WalkedNodes();
    split.Weights();
    CHECK(walked > 0);
    CHECK(walked < graph_nodes);
    for (size_t i = 0; i < params.size(); ++i) {
      CAPTURE(i);
      CHECK(torch::allclose(params[i].grad(), want[i], 1e-5, 1e-5));
    }
  }
}

// W finishes one weight's side (its transpose, its accumulation into .grad)
// before it starts the next, as B does: made last, its stand-ins came first
// in the engine's order, so every weight gradient of the stage was computed
// before any was added into .grad, all of them held at once (the zoo MLP's
// W, the whole model as one stage at 8 samples, ran 1.6x its B; now 0.8x).
TEST_CASE("W finishes each layer's weight gradients before the next layer's, as B does") {
  torch::manual_seed(5);
  constexpr int kLayers = 6;
  std::vector<at::Tensor> params;  // w0, b0, w1, b1, ...
  for (int l = 0; l < kLayers; ++l) {
    params.push_back(torch::randn({16, 16}, torch::requires_grad()));
    params.push_back(torch::randn({16}, torch::requires_grad()));
  }
  const auto loss_of = [&](const at::Tensor& x) {
    at::Tensor h = x;
    for (int l = 0; l < kLayers; ++l) {
      h = torch::relu(torch::nn::functional::linear(h, params[2 * l], params[2 * l + 1]));
    }
    return h.sum();
  };
  std::vector<int> order;  // the layer of each gradient as it arrives
  for (size_t p = 0; p < params.size(); ++p) {
    params[p].register_hook([&order, p](const at::Tensor& g) {
      order.push_back(int(p / 2));
      return g;
    });
  }
  const auto grouped_by_layer = [&] {
    // Both of a layer's gradients arrive together, the last layer first.
    if (order.size() != params.size()) return false;
    for (size_t i = 0; i < order.size(); ++i)
      if (order[i] != kLayers - 1 - int(i / 2)) return false;
    return true;
  };
  loss_of(torch::randn({4, 16}).requires_grad_()).backward();
  CHECK(grouped_by_layer());  // B's order, the reference
  order.clear();
  const at::Tensor x = torch::randn({4, 16}).requires_grad_();
  const at::Tensor loss = loss_of(x);
  mp::SplitBackward split({loss}, {torch::ones_like(loss)}, {x}, params);
  CHECK(order.empty());  // I computed no weight gradient
  split.Weights();
  CAPTURE(order);
  CHECK(grouped_by_layer());
}

// A weight used at every step of a loop (an RNN's) is reached from many
// intermediates, none alone: W starts from all of them at once and the
// engine sums what they give it, as B does. Sent to a second backward from
// the roots instead, W ran the whole recurrence again (the zoo LSTM's
// I + W 1.9-2.0x its B).
TEST_CASE("a weight used at every step of a loop: W sums its uses without running I's chain again") {
  torch::manual_seed(6);
  constexpr int kSteps = 5;
  const at::Tensor wx = torch::randn({8, 8}, torch::requires_grad());
  const at::Tensor wh = torch::randn({8, 8}, torch::requires_grad());
  const auto loss_of = [&](const at::Tensor& x, int* first_step_runs) {
    at::Tensor h = torch::zeros({2, 8});
    for (int t = 0; t < kSteps; ++t) {
      h = torch::tanh(torch::matmul(h, wh) + torch::matmul(x[t], wx)) * 0.5;
      if (t == 0 && first_step_runs) {
        h.register_hook([first_step_runs](const at::Tensor& g) {
          ++*first_step_runs;
          return g;
        });
      }
    }
    return (h * h).sum();
  };
  const at::Tensor x0 = torch::randn({kSteps, 2, 8});
  const at::Tensor x1 = x0.clone().requires_grad_(true);
  loss_of(x1, nullptr).backward();
  const at::Tensor want_wx = wx.grad().clone(), want_wh = wh.grad().clone(), want_x = x1.grad().clone();
  wx.mutable_grad().zero_();
  wh.mutable_grad().zero_();

  int runs = 0;  // how often the first step's backward ran
  const at::Tensor x = x0.clone().requires_grad_(true);
  const at::Tensor loss = loss_of(x, &runs);
  mp::SplitBackward split({loss}, {torch::ones_like(loss)}, {x}, {wx, wh});
  CHECK(runs == 1);
  split.Weights();
  CHECK(runs == 1);  // W ran nothing of the chain to x
  CHECK(torch::allclose(x.grad(), want_x));
  CHECK(torch::allclose(wx.grad(), want_wx, 1e-5, 1e-6));
  CHECK(torch::allclose(wh.grad(), want_wh, 1e-5, 1e-6));
}

// A batch norm's input gradient is made of the sums its weight and bias
// gradients are: I computes those with it (W would make the sums again);
// a linear layer's weight gradient still waits for W.
TEST_CASE("I computes a normalisation's weight gradients with its input gradient, W the rest") {
  torch::manual_seed(7);
  const at::Tensor w = torch::randn({8, 8}, torch::requires_grad());
  const at::Tensor gamma = torch::rand({8}).add_(0.5).requires_grad_(true);
  const at::Tensor beta = torch::randn({8}, torch::requires_grad());
  const std::vector<at::Tensor> params{w, gamma, beta};
  const auto loss_of = [&](const at::Tensor& x) {
    namespace F = torch::nn::functional;
    const at::Tensor y = F::batch_norm(torch::matmul(x, w), at::Tensor(), at::Tensor(),
                                       F::BatchNormFuncOptions().weight(gamma).bias(beta).training(true));
    return (torch::relu(y) * torch::arange(8)).sum();
  };
  const at::Tensor x0 = torch::randn({6, 8});
  const at::Tensor x1 = x0.clone().requires_grad_(true);
  loss_of(x1).backward();
  std::vector<at::Tensor> want;
  for (const at::Tensor& p : params) want.push_back(p.grad().clone());
  Zero(params);
  for (const at::Tensor& p : params) p.mutable_grad() = at::Tensor();

  const at::Tensor x = x0.clone().requires_grad_(true);
  const at::Tensor loss = loss_of(x);
  mp::SplitBackward split({loss}, {torch::ones_like(loss)}, {x}, params);
  REQUIRE(gamma.grad().defined());
  REQUIRE(beta.grad().defined());
  CHECK(torch::allclose(gamma.grad(), want[1], 1e-5, 1e-6));
  CHECK(torch::allclose(beta.grad(), want[2], 1e-5, 1e-6));
  CHECK(!w.grad().defined());
  split.Weights();
  for (size_t i = 0; i < params.size(); ++i) {
    CAPTURE(i);
    CHECK(torch::allclose(params[i].grad(), want[i], 1e-5, 1e-6));
  }
}
