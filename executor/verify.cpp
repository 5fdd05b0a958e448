// Verify: flatten both output lists to tensors (FlattenTensors keeps their
// order), require equal shapes and dtypes, and compare: bit for bit, or
// with allclose when a tolerance is given.
#include "executor/verify.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "executor/microbatches.h"
#include "planner/graph/rng_scope.h"
#include "planner/graph/run_graph.h"

namespace mp {

std::vector<c10::IValue> RunWhole(const CanonicalGraph& canonical, const std::vector<c10::IValue>& model_inputs) {
  const at::NoGradGuard no_grad;  // as the pipeline infers: modules may branch on it (nn.TransformerEncoder)
  return GraphRunner(canonical.graph, "whole").Run(canonical.Stack(model_inputs));
}

std::vector<c10::IValue> RunWholeMicrobatches(const LoadedPlan& loaded, const std::vector<c10::IValue>& model_inputs,
                                              uint64_t seed, int64_t step) {
  std::vector<std::vector<c10::IValue>> outputs;
  for (const auto& microbatch : SplitMicrobatches(loaded.plan, model_inputs)) {
    const RngScope rng({seed, step, int64_t(outputs.size())});
    outputs.push_back(RunWhole(loaded.canonical, microbatch));
  }
  return JoinMicrobatches(outputs, loaded.output_layout);
}

Verification Verify(const std::vector<c10::IValue>& got, const std::vector<c10::IValue>& want, double rtol,
                    double atol) {
  std::vector<at::Tensor> a, b;
  for (const auto& v : got) for (auto& t : FlattenTensors(v)) a.push_back(t);
  for (const auto& v : want) for (auto& t : FlattenTensors(v)) b.push_back(t);
  Verification result;
  result.ok = a.size() == b.size() && !a.empty();
  for (size_t i = 0; result.ok && i < a.size(); ++i) {
    result.ok = a[i].sizes() == b[i].sizes() && a[i].scalar_type() == b[i].scalar_type();
    if (!result.ok) break;
    ++result.tensors;
    if (a[i].numel() == 0) continue;
    if (a[i].is_floating_point()) {
      result.max_abs_diff = std::max(result.max_abs_diff, (a[i] - b[i]).abs().max().item<double>());
      result.ok = rtol == 0 && atol == 0 ? at::equal(a[i], b[i]) : at::allclose(a[i], b[i], rtol, atol);
    } else {
      result.ok = at::equal(a[i], b[i]);
    }
  }
  return result;
}

StateComparison CompareState(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& want,
                             const std::vector<std::string>& names, double rtol) {
  StateComparison result;
  result.ok = got.size() == want.size();
  for (size_t i = 0; result.ok && i < got.size(); ++i) {
    ++result.tensors;
    if (got[i].sizes() != want[i].sizes() || got[i].scalar_type() != want[i].scalar_type()) {
      result.ok = false;
      result.worst = i < names.size() ? names[i] : "";
      break;
    }
    if (got[i].numel() == 0) continue;
    const at::Tensor a = got[i].detach().to(at::kDouble), b = want[i].detach().to(at::kDouble);
    const double scale = std::max(b.abs().max().item<double>(), 1e-30);
    const double diff = (a - b).abs().max().item<double>() / scale;
    if (diff > result.max_relative_diff || std::isnan(diff)) {
      result.max_relative_diff = std::isnan(diff) ? INFINITY : diff;
      result.worst = i < names.size() ? names[i] : "";
    }
  }
  result.ok = result.ok && result.max_relative_diff <= rtol;
  return result;
}

}  // namespace mp
