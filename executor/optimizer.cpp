// Optimizer: the update rules of torch.optim.SGD, Adam and AdamW in their
// multi-tensor forms (foreach=True, torch.optim's default on CUDA: each
// operation over all of a device's parameters in a few kernel launches
// instead of one a tensor; on CPU the same operations a tensor at a time,
// the results equal to the single-tensor forms' and to LibTorch's
// torch::optim), and where the settings come from.
#include "executor/optimizer.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <numeric>
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

void Optimizer::Step(const std::vector<size_t>& indices, const std::vector<at::Tensor>& params) {
  if (indices.size() != params.size()) {
    throw InternalError(Concat("optimizer: ", indices.size(), " state indices for ", params.size(), " parameters"));
  }
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> p, g;  // those with a gradient: PyTorch skips the rest, step count included
  std::vector<State*> states;
  for (size_t j = 0; j < params.size(); ++j) {
    if (!params[j].grad().defined()) continue;
    p.push_back(params[j]);
    g.push_back(params[j].grad());
    states.push_back(&states_.at(indices[j]));
    ++states.back()->steps;
  }
  if (p.empty()) return;
  const OptimizerSettings& s = settings_;
  if (s.kind == OptimizerKind::kSgd) {
    if (s.weight_decay != 0) g = at::_foreach_add(g, p, s.weight_decay);
    if (s.momentum != 0) {
      std::vector<at::Tensor> buffers, grads;  // those with a buffer; a first step's is its gradient
      for (size_t j = 0; j < p.size(); ++j) {
        if (states[j]->first.defined()) {
          buffers.push_back(states[j]->first);
          grads.push_back(g[j]);
        } else {
          states[j]->first = g[j].detach().clone();
        }
      }
      if (!buffers.empty()) {
        at::_foreach_mul_(buffers, s.momentum);
        at::_foreach_add_(buffers, grads);
      }
      for (size_t j = 0; j < p.size(); ++j) g[j] = states[j]->first;
    }
    at::_foreach_add_(p, g, -s.lr);
    return;
  }
  if (s.kind == OptimizerKind::kAdamW) at::_foreach_mul_(p, 1 - s.lr * s.weight_decay);
  if (s.kind == OptimizerKind::kAdam && s.weight_decay != 0) g = at::_foreach_add(g, p, s.weight_decay);
  std::vector<at::Tensor> first, second;
  std::vector<at::Scalar> root_correction2, step_size;  // per parameter: their step counts may differ
  for (size_t j = 0; j < p.size(); ++j) {
    State& state = *states[j];
    if (!state.first.defined()) {
      state.first = at::zeros_like(p[j]);
      state.second = at::zeros_like(p[j]);
    }
    first.push_back(state.first);
    second.push_back(state.second);
    root_correction2.emplace_back(std::sqrt(1 - std::pow(s.beta2, double(state.steps))));
    step_size.emplace_back(-s.lr / (1 - std::pow(s.beta1, double(state.steps))));
  }
  at::_foreach_mul_(first, s.beta1);
  at::_foreach_add_(first, g, 1 - s.beta1);
  at::_foreach_mul_(second, s.beta2);
  at::_foreach_addcmul_(second, g, g, 1 - s.beta2);
  std::vector<at::Tensor> denominator = at::_foreach_sqrt(second);
  at::_foreach_div_(denominator, root_correction2);
  at::_foreach_add_(denominator, s.eps);
  at::_foreach_addcdiv_(p, first, denominator, step_size);
}

void Optimizer::Step(const std::vector<at::Tensor>& params) {
  std::vector<size_t> indices(params.size());
  std::iota(indices.begin(), indices.end(), size_t(0));
  Step(indices, params);
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

namespace {

// The .grad of `params` that have one, grouped by device and type: a
// multi-tensor kernel takes one of each.
std::vector<std::vector<at::Tensor>> GradientsByDevice(const std::vector<at::Tensor>& params) {
  std::vector<std::vector<at::Tensor>> groups;
  for (const at::Tensor& p : params) {
    const at::Tensor& grad = p.grad();
    if (!grad.defined()) continue;
    auto it = std::find_if(groups.begin(), groups.end(), [&](const std::vector<at::Tensor>& group) {
      return group[0].device() == grad.device() && group[0].scalar_type() == grad.scalar_type();
    });
    if (it == groups.end()) it = groups.insert(groups.end(), std::vector<at::Tensor>());
    it->push_back(grad);
  }
  return groups;
}

}  // namespace

double SquaredGradNorm(const std::vector<at::Tensor>& params) {
  at::NoGradGuard no_grad;
  double squares = 0;
  for (const std::vector<at::Tensor>& grads : GradientsByDevice(params)) {
    const at::Tensor norms = at::stack(at::_foreach_norm(grads, 2)).to(at::kDouble);
    squares += norms.square().sum().item<double>();  // one read a device
  }
  return squares;
}

double ClipFactor(double norm, double max_norm) { return std::min(1.0, max_norm / (norm + 1e-6)); }

double ClipGradients(const std::vector<at::Tensor>& params, double squares, double max_norm) {
  const double norm = std::sqrt(squares);
  const double factor = ClipFactor(norm, max_norm);
  if (factor >= 1) return norm;
  at::NoGradGuard no_grad;
  for (std::vector<at::Tensor>& grads : GradientsByDevice(params)) at::_foreach_mul_(grads, factor);
  return norm;
}

}  // namespace mp
