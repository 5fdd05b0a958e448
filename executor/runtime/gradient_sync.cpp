// SyncGradients and StepOptimizer: which rank holds which parameter comes
// from the stage layout and the Distribution's owners.
#include "executor/runtime/gradient_sync.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "common/error.h"
#include "executor/gradient_sum.h"
#include "executor/process_group.h"
#include "planner/graph/run_graph.h"

namespace mp {
namespace {

// Per parameter: the ranks whose stages read it.
std::vector<std::set<int>> RanksUsing(const LoadedPlan& loaded, const Distribution* dist) {
  const StageLayout& layout = loaded.layout;
  std::vector<std::set<int>> ranks(loaded.canonical.params.size());
  for (size_t s = 0; s < layout.stage_params.size(); ++s) {
    for (const auto& [key, tensor] : layout.stage_params[s]) {
      ranks[layout.param_index.at(key)].insert(dist ? dist->owner.at(s) : 0);
    }
  }
  return ranks;
}

// Sums the gradients of params[i], i in `which`, over `group` in one
// message (SumGradients, into `kept`); a rank where `holds(i)` is false
// adds zeros and keeps its own.
template <typename Holds>
void SumGradientsOf(ProcessGroup& group, const std::vector<LiftedTensor>& params, const std::vector<size_t>& which,
                    GatherBuffers& kept, Holds holds, const std::string& what) {
  if (which.empty()) return;
  std::vector<at::Tensor> tensors;
  std::vector<bool> held;
  for (size_t i : which) tensors.push_back(params[i].tensor), held.push_back(holds(i));
  try {
    SumGradients(group, tensors, kept, held);
  } catch (const std::exception& e) {
    throw Error(Concat(what, ": ", ErrorLine(e.what())));
  }
}

}  // namespace

std::vector<int64_t> ResetGradients(const LoadedPlan& loaded, const Distribution* dist) {
  const std::vector<LiftedTensor>& params = loaded.canonical.params;
  std::vector<int64_t> kept(loaded.plan.programs.size(), 0);
  std::vector<bool> zeroed(params.size(), false);
  if (dist) {
    for (const auto& [device, stepped] : StepsByDevice(loaded, dist)) {
      for (size_t i : stepped) {
        const at::Tensor& p = params[i].tensor;
        for (const auto& [sum, buffers] : dist->gather_buffers) {
          if (!ZeroIfKept(buffers, p)) continue;
          zeroed[i] = true;
          kept.at(device) += p.numel() * int64_t(p.element_size());
          break;
        }
      }
    }
  }
  for (size_t i = 0; i < params.size(); ++i) {
    if (!zeroed[i]) params[i].tensor.mutable_grad() = at::Tensor();
  }
  for (const auto& [i, alias] : loaded.layout.aliases) alias.mutable_grad() = at::Tensor();
  return kept;
}

std::vector<AllReduceSpan> SyncGradients(const LoadedPlan& loaded, const Distribution* dist) {
  const CanonicalGraph& canonical = loaded.canonical;
  const StageLayout& layout = loaded.layout;
  at::NoGradGuard no_grad;
  for (const auto& [i, alias] : layout.aliases) {
    if (!alias.grad().defined()) continue;
    at::Tensor& grad = canonical.params[i].tensor.mutable_grad();
    // A new tensor, not added in place: a backward's gradient may share its
    // storage with others. (One kept in its sum's buffer is copied back in.)
    grad = grad.defined() ? grad + alias.grad() : alias.grad().clone();
  }
  std::vector<AllReduceSpan> spans(loaded.stages.size());
  if (!dist) return spans;
  const int rank = dist->group->rank();
  const auto ranks_using = RanksUsing(loaded, dist);
  // Tied parameters over every rank: with replicas that sums every
  // replica's too, so the stage groups below leave them out.
  std::vector<size_t> shared;
  std::vector<bool> reduced(canonical.params.size(), false);
  for (size_t i = 0; i < canonical.params.size(); ++i) {
    if (ranks_using[i].size() > 1 && canonical.params[i].tensor.requires_grad()) shared.push_back(i), reduced[i] = true;
  }
  SumGradientsOf(*dist->group, canonical.params, shared, dist->gather_buffers[-1],
                 [&](size_t i) { return ranks_using[i].count(rank) > 0; },
                 "adding up the gradients of parameters shared between ranks");
  for (const auto& [s, group] : dist->stage_groups) {
    const auto begin = std::chrono::steady_clock::now();
    std::vector<size_t> own;  // the first of this rank's stages to read it reduces it
    for (const auto& [key, tensor] : layout.stage_params[s]) {
      const size_t i = layout.param_index.at(key);
      if (!reduced[i] && canonical.params[i].tensor.requires_grad()) own.push_back(i), reduced[i] = true;
    }
    std::sort(own.begin(), own.end());  // the same order on every replica (the map's is by address)
    SumGradientsOf(*group, canonical.params, own, dist->gather_buffers[s], [](size_t) { return true; },
                   Concat("stage ", s, ": adding up its gradients over the ", dist->replicas, " replicas"));
    const auto end = std::chrono::steady_clock::now();
    if (own.empty()) continue;
    spans[s] = {std::chrono::duration_cast<std::chrono::nanoseconds>(begin.time_since_epoch()).count(),
                std::chrono::duration_cast<std::chrono::nanoseconds>(end.time_since_epoch()).count()};
  }
  return spans;
}

std::vector<bool> SteppedHere(const LoadedPlan& loaded, const Distribution* dist) {
  std::vector<bool> here(loaded.canonical.params.size(), false);
  for (const auto& device : StepsByDevice(loaded, dist)) {
    for (size_t i : device.second) here[i] = true;
  }
  return here;
}

double ClipGradientNorm(const LoadedPlan& loaded, const Distribution* dist, const Optimizer& optimizer) {
  const double max_norm = optimizer.settings().clip_grad_norm;
  if (max_norm <= 0) return 0;
  const std::vector<LiftedTensor>& params = loaded.canonical.params;
  const int rank = dist ? dist->group->rank() : 0;
  const std::vector<bool> here = SteppedHere(loaded, dist);
  // A parameter several ranks read (tied) counts on the lowest of them;
  // each replica adds the same sum (its gradients are the replicas' sum).
  const auto ranks_using = RanksUsing(loaded, dist);
  std::vector<at::Tensor> mine, counted;
  for (size_t i = 0; i < here.size(); ++i) {
    if (!here[i]) continue;
    mine.push_back(params[i].tensor);
    if (*ranks_using[i].begin() == rank) counted.push_back(params[i].tensor);
  }
  double squares = SquaredGradNorm(counted);
  if (dist) {
    at::Tensor sum = at::full({1}, squares, at::kDouble);
    try {
      dist->group->AllReduceSum(sum);
    } catch (const std::exception& e) {
      throw Error(Concat("adding up the gradients' norm over the ranks (--clip-grad-norm): ", ErrorLine(e.what())));
    }
    squares = sum.item<double>() / dist->replicas;
  }
  return ClipGradients(mine, squares, max_norm);
}

std::map<int, std::vector<size_t>> StepsByDevice(const LoadedPlan& loaded, const Distribution* dist) {
  const StageLayout& layout = loaded.layout;
  std::vector<int> device(loaded.canonical.params.size(), -1);
  for (size_t s = 0; s < layout.stage_params.size(); ++s) {  // stage order: the first reader's device
    if (dist && dist->owner.at(s) != dist->group->rank()) continue;
    for (const auto& [key, tensor] : layout.stage_params[s]) {
      int& d = device[layout.param_index.at(key)];
      if (d < 0) d = loaded.plan.stages.at(s).program;
    }
  }
  std::map<int, std::vector<size_t>> steps;
  for (size_t i = 0; i < device.size(); ++i) {
    if (device[i] >= 0) steps[device[i]].push_back(i);
  }
  return steps;
}

}  // namespace mp
