// The optimizer step after a batch's gradients are in: torch.optim.SGD
// (with momentum), Adam and AdamW as PyTorch computes them, after
// torch.nn.utils.clip_grad_norm_'s scaling where asked. Which one runs is
// the plan's (mpplan --optimizer, whose state the plan's memory holds)
// unless mpexec's flags choose another.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "planner/plan/plan.h"

namespace mp {

// What the user asked for (mpexec's flags); unset: the defaults of the
// optimizer that runs, PyTorch's.
struct OptimizerOptions {
  std::string name;  // sgd | momentum (SGD with momentum) | adam | adamw; "": the plan's
  double lr = 0.001;
  std::optional<double> momentum;                     // SGD: 0; momentum: 0.9
  std::optional<std::pair<double, double>> betas;     // Adam(W): 0.9, 0.999
  std::optional<double> eps;                          // Adam(W): 1e-8
  std::optional<double> weight_decay;                 // 0; AdamW: 0.01
  double clip_grad_norm = 0;                          // > 0: the gradients' total L2 norm at most this
};

enum class OptimizerKind { kSgd, kAdam, kAdamW };

// What runs: every setting resolved.
struct OptimizerSettings {
  OptimizerKind kind = OptimizerKind::kSgd;
  double lr = 0.001, momentum = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  double clip_grad_norm = 0;
  // The plan's word for it: sgd, momentum, adam or adamw.
  std::string Name() const;
  // "adam (lr 0.001, betas 0.9 0.999, eps 1e-08)", weight decay and
  // clipping where set.
  std::string Describe() const;
};

// `options` over the plan's optimizer (a plan older than Plan::optimizer:
// by its optimizer_state_factor, 2 adam, 1 momentum, else sgd); --momentum
// alone asks for SGD. InputError naming the flag that does not apply to the
// optimizer that runs (--betas with SGD, --momentum with Adam).
OptimizerSettings ResolveOptimizer(const OptimizerOptions& options, const Plan& plan);

// One state per parameter index; workers touch disjoint indices.
class Optimizer {
 public:
  Optimizer(size_t params, const OptimizerSettings& settings) : settings_(settings), states_(params) {}
  // Steps each of `params` by its .grad, `params[j]` with state
  // `indices[j]`, all of them in each multi-tensor operation (one device's
  // parameters: a few kernel launches in all on a GPU); nothing for a
  // parameter without one (as PyTorch skips a parameter whose .grad is
  // None, step count included).
  void Step(const std::vector<size_t>& indices, const std::vector<at::Tensor>& params);
  // The same for a model's parameters in state order: `params[i]` with
  // state i.
  void Step(const std::vector<at::Tensor>& params);
  // Bytes of parameter `index`'s state (0 before its first step, or with
  // plain SGD).
  int64_t StateBytes(size_t index) const;
  const OptimizerSettings& settings() const { return settings_; }
  // A schedule's learning rate for the steps after (param_group["lr"]).
  void SetLearningRate(double lr) { settings_.lr = lr; }
  // Parameter `index`'s state as torch.optim's state_dict keeps a
  // parameter's: {"step", "exp_avg", "exp_avg_sq"} (Adam(W)), {"step",
  // "momentum_buffer"} (SGD with momentum), {"step"} (plain SGD); None
  // before its first step.
  c10::IValue StateOf(size_t index) const;
  // Sets it from StateOf's form, for a parameter like `param`; InputError
  // naming `what` where it is not that form or its tensors are not shaped
  // and typed as `param`. `keep` false: checks it only.
  void SetState(size_t index, const c10::IValue& state, const at::Tensor& param, const std::string& what,
                bool keep = true);

 private:
  struct State {
    at::Tensor first, second;  // SGD's momentum buffer; Adam's exp_avg and exp_avg_sq
    int64_t steps = 0;
  };
  OptimizerSettings settings_;
  std::vector<State> states_;
};

// The sum of the squared L2 norms of the .grad of `params` (those with
// one), in double: a multi-tensor norm and one read a device.
double SquaredGradNorm(const std::vector<at::Tensor>& params);

// clip_grad_norm_: the factor the gradients are scaled by for a total norm
// `norm` and a limit `max_norm`: max_norm / (norm + 1e-6), at most 1.
double ClipFactor(double norm, double max_norm);

// Scales the .grad of `params` (those with one) by ClipFactor for the total
// norm sqrt(`squares`), SquaredGradNorm over the whole model's parameters;
// returns that norm.
double ClipGradients(const std::vector<at::Tensor>& params, double squares, double max_norm);

}  // namespace mp
