// Optimizer: the update rules of torch.optim.SGD, Adam and AdamW (PyTorch
// 1.13's single-tensor forms, which LibTorch's torch::optim also follows),
// and where the settings come from.
#include "executor/optimizer.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <tuple>

#include "common/error.h"

namespace mp {

namespace {

// The name of the optimizer that runs when mpexec's flags do not say.
std::string PlansOptimizer(const Plan& plan) {
  if (!plan.optimizer.empty()) return plan.optimizer;
  if (plan.optimizer_state_factor == 2) return "adam";
  return plan.optimizer_state_factor == 1 ? "momentum" : "sgd";
}

void CheckAtLeast(double value, double low, const char* flag) {
  if (!(value >= low)) throw InputError(Concat(flag, " ", value, ": expected a value >= ", low));
}

}  // namespace

std::string OptimizerSettings::Name() const {
  if (kind == OptimizerKind::kAdam) return "adam";
  if (kind == OptimizerKind::kAdamW) return "adamw";
  return momentum > 0 ? "momentum" : "sgd";
}

std::string OptimizerSettings::Describe() const {
  std::ostringstream out;
  out << Name() << " (lr " << lr;
  if (kind == OptimizerKind::kSgd) {
    if (momentum > 0) out << ", momentum " << momentum;
  } else {
    out << ", betas " << beta1 << " " << beta2 << ", eps " << eps;
  }
  if (weight_decay > 0) out << ", weight decay " << weight_decay;
  if (clip_grad_norm > 0) out << ", gradients clipped to norm " << clip_grad_norm;
  out << ")";
  return out.str();
}

OptimizerSettings ResolveOptimizer(const OptimizerOptions& options, const Plan& plan) {
  std::string name = options.name;
  std::string whose = "--optimizer " + name;  // where the choice came from, for the errors
  if (name.empty() && options.momentum) {  // --momentum alone: torch.optim.SGD's argument
    name = *options.momentum > 0 ? "momentum" : "sgd";
    whose = "--momentum asks for SGD";
  }
  if (name.empty()) {
    name = PlansOptimizer(plan);
    whose = "the plan's optimizer: mpplan --optimizer " + name + "; mpexec --optimizer chooses another";
  }
  if (OptimizerStateTensors(name) < 0) {
    throw InputError(Concat("--optimizer ", name, ": expected sgd, momentum, adam or adamw"));
  }
  OptimizerSettings s;
  s.lr = options.lr;
  s.clip_grad_norm = options.clip_grad_norm;
  CheckAtLeast(s.lr, 0, "--lr");
  CheckAtLeast(s.clip_grad_norm, 0, "--clip-grad-norm");
  const bool adam = name == "adam" || name == "adamw";
  if (adam) {
    if (options.momentum) {
      throw InputError(Concat("--momentum: ", name, " takes none (", whose, "); its moments decay by --betas"));
    }
    s.kind = name == "adam" ? OptimizerKind::kAdam : OptimizerKind::kAdamW;
    if (options.betas) std::tie(s.beta1, s.beta2) = *options.betas;
    for (double beta : {s.beta1, s.beta2}) {
      if (!(beta >= 0 && beta < 1)) throw InputError(Concat("--betas: ", beta, " is not in [0, 1)"));
    }
    s.eps = options.eps.value_or(1e-8);
    CheckAtLeast(s.eps, 0, "--eps");
    s.weight_decay = options.weight_decay.value_or(s.kind == OptimizerKind::kAdamW ? 0.01 : 0);
  } else {
    for (const auto& [given, flag] : {std::make_pair(bool(options.betas), "--betas"),
                                      std::make_pair(bool(options.eps), "--eps")}) {
      if (given) throw InputError(Concat(flag, ": ", name, " takes none (", whose, "); adam and adamw do"));
    }
    s.kind = OptimizerKind::kSgd;
    s.momentum = options.momentum.value_or(name == "momentum" ? 0.9 : 0);
    CheckAtLeast(s.momentum, 0, "--momentum");
    if (name == "momentum" && s.momentum == 0) {
      throw InputError("--momentum 0: --optimizer momentum is SGD with momentum (--optimizer sgd is without)");
    }
    s.weight_decay = options.weight_decay.value_or(0);
  }
  CheckAtLeast(s.weight_decay, 0, "--weight-decay");
  return s;
}

int64_t Optimizer::StateBytes(size_t index) const {
  const State& state = states_.at(index);
  return (state.first.defined() ? int64_t(state.first.nbytes()) : 0) +
         (state.second.defined() ? int64_t(state.second.nbytes()) : 0);
}

void Optimizer::Step(size_t index, const at::Tensor& param) {
  const at::Tensor& given = param.grad();
  if (!given.defined()) return;
  at::NoGradGuard no_grad;
  State& state = states_.at(index);
  const OptimizerSettings& s = settings_;
  ++state.steps;
  if (s.kind == OptimizerKind::kSgd) {
    at::Tensor grad = s.weight_decay != 0 ? given.add(param, s.weight_decay) : given;
    if (s.momentum != 0) {
      if (!state.first.defined()) {
        state.first = grad.detach().clone();
      } else {
        state.first.mul_(s.momentum).add_(grad);
      }
      grad = state.first;
    }
    param.add_(grad, -s.lr);
    return;
  }
  if (s.kind == OptimizerKind::kAdamW) param.mul_(1 - s.lr * s.weight_decay);
  const at::Tensor grad =
      s.kind == OptimizerKind::kAdam && s.weight_decay != 0 ? given.add(param, s.weight_decay) : given;
  if (!state.first.defined()) {
    state.first = at::zeros_like(param);
    state.second = at::zeros_like(param);
  }
  state.first.mul_(s.beta1).add_(grad, 1 - s.beta1);
  state.second.mul_(s.beta2).addcmul_(grad, grad, 1 - s.beta2);
  const double bias_correction1 = 1 - std::pow(s.beta1, double(state.steps));
  const double bias_correction2 = 1 - std::pow(s.beta2, double(state.steps));
  const at::Tensor denom = (state.second.sqrt() / std::sqrt(bias_correction2)).add_(s.eps);
  param.addcdiv_(state.first, denom, -s.lr / bias_correction1);
}

namespace {

// The names of a state's tensors under this optimizer, in State's order.
std::vector<std::string> StateTensorNames(const OptimizerSettings& s) {
  if (s.kind != OptimizerKind::kSgd) return {"exp_avg", "exp_avg_sq"};
  if (s.momentum > 0) return {"momentum_buffer"};
  return {};
}

}  // namespace

c10::IValue Optimizer::StateOf(size_t index) const {
  const State& state = states_.at(index);
  if (state.steps == 0) return c10::IValue();
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  dict.insert("step", state.steps);
  const std::vector<std::string> names = StateTensorNames(settings_);
  const at::Tensor* tensors[] = {&state.first, &state.second};
  for (size_t t = 0; t < names.size(); ++t) dict.insert(names[t], tensors[t]->detach().clone());
  return dict;
}

void Optimizer::SetState(size_t index, const c10::IValue& given, const at::Tensor& param, const std::string& what,
                         bool keep) {
  State& state = states_.at(index);
  if (given.isNone()) {
    if (keep) state = State();
    return;
  }
  const std::vector<std::string> names = StateTensorNames(settings_);
  std::string expected = "step";
  for (const std::string& name : names) expected += ", " + name;
  if (!given.isGenericDict()) throw InputError(Concat(what, ": expected a dict of ", expected));
  const c10::impl::GenericDict dict = given.toGenericDict();
  if (dict.size() != names.size() + 1) {
    throw InputError(Concat(what, ": expected ", expected, " (", settings_.Name(), "'s), found ", dict.size(), " entries"));
  }
  State set;
  const auto entry = [&](const std::string& name) {
    const auto it = dict.find(name);
    if (it == dict.end()) throw InputError(Concat(what, ": no ", name, " (", settings_.Name(), " keeps ", expected, ")"));
    return it->value();
  };
  const c10::IValue step = entry("step");
  if (!step.isInt() || step.toInt() < 1) throw InputError(Concat(what, ".step: expected a step count of 1 or more"));
  set.steps = step.toInt();
  at::Tensor* tensors[] = {&set.first, &set.second};
  for (size_t t = 0; t < names.size(); ++t) {
    const c10::IValue value = entry(names[t]);
    if (!value.isTensor() || value.toTensor().sizes() != param.sizes() ||
        value.toTensor().scalar_type() != param.scalar_type()) {
      throw InputError(Concat(what, ".", names[t], ": expected a ", param.scalar_type(), " tensor of shape ",
                              param.sizes(), ", as the parameter"));
    }
    if (keep) *tensors[t] = value.toTensor().to(param.device()).clone();
  }
  if (keep) state = std::move(set);
}

double SquaredGradNorm(const at::Tensor& param) {
  const at::Tensor& grad = param.grad();
  if (!grad.defined()) return 0;
  const double norm = grad.detach().norm().item<double>();
  return norm * norm;
}

double ClipFactor(double norm, double max_norm) { return std::min(1.0, max_norm / (norm + 1e-6)); }

double ClipGradients(const std::vector<at::Tensor>& params, double squares, double max_norm) {
  const double norm = std::sqrt(squares);
  const double factor = ClipFactor(norm, max_norm);
  if (factor >= 1) return norm;
  at::NoGradGuard no_grad;
  for (const at::Tensor& p : params) {
    if (p.grad().defined()) p.mutable_grad().mul_(factor);
  }
  return norm;
}

}  // namespace mp
