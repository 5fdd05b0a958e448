// The optimizer mpexec steps with (executor/optimizer.h) against
// LibTorch's own torch::optim and clip_grad_norm_, which compute what
// torch.optim and torch.nn.utils.clip_grad_norm_ do in Python; and where
// its settings come from (the plan's optimizer, mpexec's flags).
#include <doctest/doctest.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "executor/optimizer.h"

namespace {

at::Tensor Start() { return at::arange(35, at::kFloat).reshape({5, 7}).cos(); }

// Step n's gradient; step 2 has none (the parameter sat out, as a stage's
// unused weight does): both skip it, step count included.
at::Tensor Gradient(int step) {
  return step == 2 ? at::Tensor() : (at::arange(35, at::kFloat).reshape({5, 7}) * (step + 1)).sin() * 0.1;
}

// Five steps of ours and of LibTorch's on equal parameters and gradients.
void CheckSameAsLibTorch(const mp::OptimizerSettings& settings,
                         const std::function<std::unique_ptr<torch::optim::Optimizer>(at::Tensor)>& make) {
  at::Tensor ours = Start().requires_grad_();
  at::Tensor theirs = Start().requires_grad_();
  mp::Optimizer optimizer(1, settings);
  const auto reference = make(theirs);
  for (int step = 0; step < 5; ++step) {
    const at::Tensor g = Gradient(step);
    ours.mutable_grad() = g.defined() ? g.clone() : at::Tensor();
    theirs.mutable_grad() = g.defined() ? g.clone() : at::Tensor();
    optimizer.Step({ours});
    reference->step();
    CAPTURE(step);
    CHECK(at::allclose(ours, theirs, 1e-6, 1e-7));
  }
  CHECK_FALSE(at::allclose(ours, Start()));  // it moved
  const int states = mp::OptimizerStateTensors(settings.Name());
  CHECK(optimizer.StateBytes(0) == states * int64_t(ours.nbytes()));
}

std::string ResolveError(const mp::OptimizerOptions& options, const mp::Plan& plan) {
  try {
    mp::ResolveOptimizer(options, plan);
  } catch (const mp::InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("sgd, momentum, adam and adamw step as torch.optim's do") {
  mp::OptimizerSettings s;
  s.lr = 0.05;
  SUBCASE("sgd") {
    CheckSameAsLibTorch(s, [&](at::Tensor p) {
      return std::make_unique<torch::optim::SGD>(std::vector<at::Tensor>{p}, torch::optim::SGDOptions(s.lr));
    });
  }
  SUBCASE("momentum, with weight decay") {
    s.momentum = 0.9;
    s.weight_decay = 0.1;
    CheckSameAsLibTorch(s, [&](at::Tensor p) {
      return std::make_unique<torch::optim::SGD>(std::vector<at::Tensor>{p},
                                                 torch::optim::SGDOptions(s.lr).momentum(0.9).weight_decay(0.1));
    });
  }
  SUBCASE("adam, with an L2 penalty") {
    s.kind = mp::OptimizerKind::kAdam;
    s.beta2 = 0.95;
    s.weight_decay = 0.1;
    CheckSameAsLibTorch(s, [&](at::Tensor p) {
      return std::make_unique<torch::optim::Adam>(
          std::vector<at::Tensor>{p}, torch::optim::AdamOptions(s.lr).betas({0.9, 0.95}).weight_decay(0.1));
    });
  }
  SUBCASE("adamw, decoupled weight decay") {
    s.kind = mp::OptimizerKind::kAdamW;
    s.eps = 1e-6;
    s.weight_decay = 0.01;
    CheckSameAsLibTorch(s, [&](at::Tensor p) {
      return std::make_unique<torch::optim::AdamW>(std::vector<at::Tensor>{p},
                                                   torch::optim::AdamWOptions(s.lr).eps(1e-6).weight_decay(0.01));
    });
  }
}

// What mpexec relies on when each device steps its own parameters in one
// multi-tensor call and the one-device reference steps them all in
// another: a parameter steps the same whatever else is in the call, its
// step count its own (the second sits out step 1, as a stage's unused
// weight does), bit for bit.
TEST_CASE("one call over several parameters steps each as a call of its own would") {
  mp::OptimizerSettings s;
  s.lr = 0.05;
  s.weight_decay = 0.1;
  for (const auto kind : {mp::OptimizerKind::kSgd, mp::OptimizerKind::kAdam, mp::OptimizerKind::kAdamW}) {
    for (const double momentum : {0.0, 0.9}) {
      if (momentum > 0 && kind != mp::OptimizerKind::kSgd) continue;
      s.kind = kind;
      s.momentum = momentum;
      CAPTURE(s.Describe());
      std::vector<at::Tensor> together, apart;
      for (int i = 0; i < 3; ++i) {
        together.push_back(at::arange(6 * (i + 1), at::kFloat).cos().requires_grad_());
        apart.push_back(together.back().detach().clone().requires_grad_());
      }
      mp::Optimizer all(3, s), each(3, s);
      for (int step = 0; step < 4; ++step) {
        for (size_t i = 0; i < 3; ++i) {
          const at::Tensor g = (at::arange(together[i].numel(), at::kFloat) * double(step + i + 1)).sin();
          together[i].mutable_grad() = i == 1 && step == 1 ? at::Tensor() : g;
          apart[i].mutable_grad() = i == 1 && step == 1 ? at::Tensor() : g.clone();
        }
        all.Step(together);
        for (size_t i = 0; i < 3; ++i) each.Step({i}, {apart[i]});
      }
      for (size_t i = 0; i < 3; ++i) {
        CAPTURE(i);
        CHECK(at::equal(together[i], apart[i]));
        CHECK(all.StateOf(i).toGenericDict().at("step").toInt() == (i == 1 ? 3 : 4));
      }
    }
  }
}

TEST_CASE("gradients are clipped to a total norm as clip_grad_norm_ clips them") {
  for (const double max_norm : {0.5, 100.0}) {  // scaled down, and left alone
    CAPTURE(max_norm);
    std::vector<at::Tensor> ours, theirs;
    for (int i = 0; i < 3; ++i) {
      const at::Tensor grad = at::arange(4 + i, at::kFloat).sin() * (i + 1);
      ours.push_back(at::zeros({4 + i}).requires_grad_());
      theirs.push_back(at::zeros({4 + i}).requires_grad_());
      ours.back().mutable_grad() = grad.clone();
      theirs.back().mutable_grad() = grad.clone();
    }
    ours.push_back(at::zeros({2}).requires_grad_());  // a parameter without a gradient counts nothing
    const double norm = std::sqrt(mp::SquaredGradNorm(ours));
    const double want = torch::nn::utils::clip_grad_norm_(theirs, max_norm);
    CHECK(norm == doctest::Approx(want).epsilon(1e-6));
    const double factor = mp::ClipFactor(norm, max_norm);
    CHECK((max_norm < norm ? factor < 1 : factor == 1));
    for (size_t i = 0; i < theirs.size(); ++i) {
      CHECK(at::allclose(ours[i].grad() * factor, theirs[i].grad(), 1e-6, 1e-8));
    }
  }
}

TEST_CASE("the optimizer that runs is the plan's unless mpexec's flags say another") {
  mp::Plan plan;
  mp::OptimizerOptions options;
  plan.optimizer = "adamw";
  plan.optimizer_state_factor = 2;
  mp::OptimizerSettings s = mp::ResolveOptimizer(options, plan);
  CHECK(s.kind == mp::OptimizerKind::kAdamW);
  CHECK(s.weight_decay == 0.01);  // torch.optim.AdamW's default
  CHECK(s.beta1 == 0.9);
  CHECK(s.beta2 == 0.999);
  CHECK(s.eps == 1e-8);
  CHECK(s.Describe() == "adamw (lr 0.001, betas 0.9 0.999, eps 1e-08, weight decay 0.01)");

  // A plan older than its optimizer key: by the state it holds.
  plan.optimizer = "";
  CHECK(mp::ResolveOptimizer(options, plan).Name() == "adam");
  plan.optimizer_state_factor = 1;
  s = mp::ResolveOptimizer(options, plan);
  CHECK(s.Name() == "momentum");
  CHECK(s.momentum == 0.9);
  plan.optimizer_state_factor = 0;
  CHECK(mp::ResolveOptimizer(options, plan).Name() == "sgd");

  // --momentum alone asks for torch.optim.SGD, over an Adam plan too.
  plan.optimizer = "adam";
  plan.optimizer_state_factor = 2;
  options.momentum = 0.5;
  s = mp::ResolveOptimizer(options, plan);
  CHECK(s.kind == mp::OptimizerKind::kSgd);
  CHECK(s.momentum == 0.5);
  CHECK(s.Describe() == "momentum (lr 0.001, momentum 0.5)");
  options.name = "adam";
  CHECK(ResolveError(options, plan) == "--momentum: adam takes none (--optimizer adam); its moments decay by --betas");

  options = {};
  options.betas = std::make_pair(0.9, 0.95);
  plan.optimizer = "sgd";
  plan.optimizer_state_factor = 0;
  CHECK(ResolveError(options, plan) ==
        "--betas: sgd takes none (the plan's optimizer: mpplan --optimizer sgd; mpexec --optimizer chooses "
        "another); adam and adamw do");
  options.betas = std::make_pair(0.9, 1.0);
  options.name = "adamw";
  CHECK(ResolveError(options, plan) == "--betas: 1 is not in [0, 1)");
  options = {};
  options.name = "momentum";
  options.momentum = 0;
  CHECK(ResolveError(options, plan) ==
        "--momentum 0: --optimizer momentum is SGD with momentum (--optimizer sgd is without)");
  options = {};
  options.lr = -1;
  CHECK(ResolveError(options, plan) == "--lr -1: expected a value >= 0");
  options = {};
  options.clip_grad_norm = 1;
  options.weight_decay = 0.1;
  CHECK(mp::ResolveOptimizer(options, plan).Describe() ==
        "sgd (lr 0.001, weight decay 0.1, gradients clipped to norm 1)");
}

TEST_CASE("an optimizer's state goes out and back in as torch.optim's state_dict holds a parameter's") {
  mp::OptimizerSettings s;
  s.kind = mp::OptimizerKind::kAdam;
  mp::Optimizer first(1, s);
  at::Tensor p = at::ones({4}).requires_grad_();
  CHECK(first.StateOf(0).isNone());  // no step yet
  for (int step = 0; step < 2; ++step) {
    p.mutable_grad() = at::tensor({1.0f, 1e-6f, 0.0f, -0.5f});
    first.Step({p});
  }
  // Each element steps by about lr whatever its gradient's size (above
  // eps): the second's 1e-6, as small as rounding where a loss does not
  // depend on it (a key's bias), moved about as far as the first's 1. Why
  // --verify judges Adam on the gradients, not on the state.
  CHECK(p[1].item<double>() == doctest::Approx(1 - 2 * s.lr).epsilon(1e-4));
  CHECK(p[0].item<double>() == doctest::Approx(1 - 2 * s.lr).epsilon(1e-4));
  CHECK(p[2].item<double>() == 1);

  const c10::IValue state = first.StateOf(0);
  REQUIRE(state.isGenericDict());
  CHECK(state.toGenericDict().at("step").toInt() == 2);
  mp::Optimizer second(1, s);
  second.SetState(0, state, p, "w");
  CHECK(second.StateBytes(0) == first.StateBytes(0));
  at::Tensor q = p.detach().clone().requires_grad_();
  p.mutable_grad() = at::tensor({0.5f, 1.0f, 0.0f, 2.0f});
  q.mutable_grad() = p.grad().clone();
  first.Step({p});
  second.Step({q});
  CHECK(at::equal(p, q));  // the third step goes on from the second's moments and step count

  std::string error;
  try {
    second.SetState(0, state, at::ones({5}), "--load-optimizer f.pt: w");
  } catch (const mp::InputError& e) {
    error = e.what();
  }
  CHECK(error == "--load-optimizer f.pt: w.exp_avg: expected a Float tensor of shape [5], as the parameter");
  mp::Optimizer sgd(1, mp::OptimizerSettings{});
  CHECK_THROWS_WITH_AS(sgd.SetState(0, state, p, "w"), "w: expected step (sgd's), found 3 entries", mp::InputError);
}
