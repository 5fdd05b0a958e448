// Liveness of values over a pipeline order: each value's birth and last use
// as positions, summed into per-cut byte counts with a difference array
// (O(nodes + values + reads)). See cut_cost.h for what crosses a cut.
#include "planner/partition/cut_cost.h"

#include <algorithm>

#include "common/error.h"
#include "planner/graph/input_spec.h"

namespace mp {
namespace {

void CheckProfileMatches(const OpGraph& graph, const Profile& profile, const std::vector<int>& order) {
  if (profile.nodes.size() != graph.nodes.size() || profile.values.size() != graph.values.size()) {
    throw InputError(Concat("profile: ", profile.nodes.size(), " nodes and ", profile.values.size(),
                            " values; the graph has ", graph.nodes.size(), " and ", graph.values.size()));
  }
  if (!profile.fingerprint.empty() && !graph.fingerprint.empty() && profile.fingerprint != graph.fingerprint) {
    throw InputError(Concat("profile: graph fingerprint ", profile.fingerprint, "; the graph's is ",
                            graph.fingerprint));
  }
  if (order.size() != graph.nodes.size()) {
    throw InternalError(Concat("order of ", order.size(), " nodes for a graph of ", graph.nodes.size()));
  }
}

bool CarriesGradient(const OpGraph& graph, const OpValue& v) {
  if (v.producer < 0 || v.gradient_free) return false;  // a model input, a frozen layer's output
  return !IsIntegerDtype(v.dtype) && v.dtype != "bool";
}

// It reads a parameter that takes a gradient (not a frozen one, nor a
// buffer): its backward has weight gradients to make.
bool ReadsParameter(const OpGraph& graph, const OpNode& node) {
  for (int in : node.inputs) {
    if (graph.values[in].is_param && !graph.values[in].frozen) return true;
  }
  return false;
}

// A node whose W keeps the gradient of its output from I: it reads a
// parameter and is not a normalisation, whose weight gradients I computes
// with its input's (planner/graph/split_backward.h).
bool KeepsGradientForW(const OpGraph& graph, const OpNode& node) {
  for (const char* kind : {"aten::batch_norm", "aten::instance_norm", "aten::layer_norm", "aten::group_norm"}) {
    if (node.kind == kind) return false;
  }
  return ReadsParameter(graph, node);
}

// Autograd adds each micro-batch's parameter gradients after a step's
// first into .grad (the first becomes .grad itself): on average (M - 1) / M
// of an addition of each parameter per micro-batch, M = ceil(batch / m),
// in the backward of the node that reads the parameter first (its W where
// the backward is split). Profile::accumulate_ms_per_mib. A frozen
// parameter (and a buffer) has no gradient to add.
void AddAccumulation(const Profile& profile, OrderCosts& c) {
  if (profile.accumulate_ms_per_mib <= 0 || c.microbatch <= 0) return;
  const int64_t m = (profile.batch + c.microbatch - 1) / c.microbatch;
  const double share = double(m - 1) / double(m);
  for (int p = 0; p < c.Positions(); ++p) {
    if (c.backward_ms[p] <= 0 || c.gradient_bytes[p] <= 0) continue;
    const double ms = share * profile.accumulate_ms_per_mib * double(c.gradient_bytes[p]) / double(1 << 20);
    c.backward_ms[p] += ms;
    c.weight_backward_ms[p] += ms;
  }
}

// The value whose storage `id` is: through views and in-place results
// (alias) and through prim::If or prim::Loop nodes, whose output is one of
// their inputs when of the same bytes (the zoo LSTM's hidden state).
int StorageOf(const OpGraph& graph, int id) {
  for (;;) {
    const OpValue& v = graph.values[id];
    if (v.producer < 0) return id;
    const OpNode& node = graph.nodes[v.producer];
    if (!v.alias && !node.has_blocks) return id;
    int from = -1;
    for (int in : node.inputs) {
      const OpValue& u = graph.values[in];
      if (!u.is_param && u.bytes == v.bytes && u.dtype == v.dtype && !u.shape.empty()) {
        from = in;
        break;
      }
    }
    if (from < 0 || from == id) return id;
    id = from;
  }
}

}  // namespace

OrderCosts ComputeOrderCosts(const OpGraph& graph, const Profile& profile, const std::vector<int>& order,
                             int64_t microbatch, bool training) {
  CheckProfileMatches(graph, profile, order);
  const int n = int(order.size());
  OrderCosts c;
  c.microbatch = microbatch;
  c.training = training;
  c.order = order;
  c.position.assign(n, -1);
  for (int p = 0; p < n; ++p) c.position.at(order[p]) = p;
  c.forward_ms.resize(n);
  c.backward_ms.assign(n, 0);
  c.input_backward_ms.assign(n, 0);
  c.weight_backward_ms.assign(n, 0);
  c.param_bytes.assign(n, 0);
  c.gradient_bytes.assign(n, 0);
  c.output_bytes.assign(n, 0);
  c.kept_bytes.assign(n, 0);
  c.weight_output_bytes.assign(n, 0);
  for (int p = 0; p < n; ++p) {
    c.forward_ms[p] = ForwardMs(profile, order[p], microbatch);
    if (!training) continue;
    c.backward_ms[p] = BackwardMs(profile, order[p], microbatch);
    c.input_backward_ms[p] = InputBackwardMs(profile, order[p], microbatch);
    c.weight_backward_ms[p] = WeightBackwardMs(profile, order[p], microbatch);
  }
  // What autograd keeps of each node's forward until the backward: measured
  // where the profile has it (NodeCost::kept_*), else the rules of
  // saved_values.h below.
  for (int p = 0; p < n; ++p) c.kept_bytes[p] = KeptBytes(profile, order[p], microbatch);
  // What I keeps for W of each node: measured in the profiler's split passes
  // (NodeCost::weight_kept), else the gradient of its outputs where it reads
  // a weight, below. An LSTM keeps its gates' gradients at every step.
  for (int p = 0; p < n; ++p) c.weight_output_bytes[p] = WeightKeptBytes(profile, order[p], microbatch);
  std::vector<int64_t> grow(n + 2, 0), grad_grow(n + 2, 0), unkept_grow(n + 2, 0);
  for (const OpValue& v : graph.values) {
    if (v.consumers.empty() && v.producer < 0) continue;
    const int64_t bytes = ValueBytesAt(profile, v.id, microbatch);
    if (v.is_param) {
      if (!v.consumers.empty()) c.param_bytes[c.position[v.consumers.front()]] += bytes;
      if (!v.consumers.empty() && !v.frozen) c.gradient_bytes[c.position[v.consumers.front()]] += bytes;
      continue;
    }
    if (v.rematerializable) continue;
    int first = n, last = -1;
    for (int reader : v.consumers) {
      first = std::min(first, c.position[reader]);
      last = std::max(last, c.position[reader]);
    }
    const int born = v.producer >= 0 ? c.position[v.producer] : first;
    if (v.producer >= 0) c.output_bytes[born] += bytes;
    if (v.producer >= 0 && !profile.nodes[v.producer].kept) {
      if (v.kept_for_backward && !v.alias) c.kept_bytes[born] += bytes;
      c.kept_bytes[born] += int64_t(graph.nodes[v.producer].kept_extra * double(bytes));
    }
    if (v.producer >= 0 && training && !v.alias && !profile.nodes[v.producer].weight_kept &&
        KeepsGradientForW(graph, graph.nodes[v.producer])) {
      c.weight_output_bytes[born] += bytes;
    }
    if (last <= born || bytes <= 0) continue;
    LiveValue live{v.id, born, last, bytes, training && CarriesGradient(graph, v), v.kept_for_backward};
    const OpValue& storage = graph.values[StorageOf(graph, v.id)];
    live.storage_born = storage.producer >= 0 ? c.position[storage.producer] : born;
    live.storage_kept = storage.kept_for_backward;
    c.live_values.push_back(live);
    grow[born + 1] += bytes;
    grow[last + 1] -= bytes;
    if (!v.kept_for_backward) {
      unkept_grow[born + 1] += bytes;
      unkept_grow[last + 1] -= bytes;
    }
    if (live.carries_gradient) {
      grad_grow[born + 1] += bytes;
      grad_grow[last + 1] -= bytes;
    }
  }
  c.cut_bytes.assign(n + 1, 0);
  c.cut_grad_bytes.assign(n + 1, 0);
  c.cut_unkept_bytes.assign(n + 1, 0);
  int64_t live = 0, grad = 0, unkept = 0;
  for (int i = 0; i <= n; ++i) {
    live += grow[i];
    grad += grad_grow[i];
    unkept += unkept_grow[i];
    c.cut_bytes[i] = (i == 0 || i == n) ? 0 : live;
    c.cut_grad_bytes[i] = (i == 0 || i == n) ? 0 : grad;
    c.cut_unkept_bytes[i] = (i == 0 || i == n) ? 0 : unkept;
  }
  if (training && !graph.outputs.empty()) {
    const OpValue& out = graph.values[graph.outputs.front()];
    const bool floating = out.dtype.find("float") != std::string::npos;  // a tensor the loss reads (not a tuple)
    if (floating && !out.kept_for_backward) c.loss_kept_bytes = ValueBytesAt(profile, out.id, microbatch);
    if (floating) c.loss_gradient_bytes = ValueBytesAt(profile, out.id, microbatch);
  }
  c.next_weight_reader.assign(n, n);
  for (int p = n - 1; p >= 0 && training; --p) {
    const OpNode& node = graph.nodes[order[p]];
    // A parameter read directly, or through a list (nn.LSTM's weights), where I keeps a gradient for W.
    if (ReadsParameter(graph, node) || c.weight_output_bytes[p] > 0) {
      c.next_weight_reader[p] = p;
      continue;
    }
    for (int v : node.outputs) {
      for (int reader : graph.values[v].consumers) {
        c.next_weight_reader[p] = std::min(c.next_weight_reader[p], c.next_weight_reader[c.position[reader]]);
      }
    }
  }
  c.forward_working_bytes.assign(n, 0);
  c.backward_working_bytes.assign(n, 0);
  c.input_backward_working_bytes.assign(n, 0);
  for (int p = 0; p < n; ++p) {
    c.forward_working_bytes[p] = std::max<int64_t>(0, ForwardWorkingBytes(profile, order[p], microbatch));
    if (!training) continue;
    const int64_t measured = BackwardWorkingBytes(profile, order[p], microbatch);
    c.backward_working_bytes[p] = measured >= 0 ? measured : c.output_bytes[p] + c.gradient_bytes[p];
    // I leaves the weights' gradients to W; a frozen layer makes none.
    const int64_t weights = ReadsOnlyFrozen(graph, graph.nodes[order[p]]) ? 0 : profile.nodes[order[p]].param_bytes;
    c.input_backward_working_bytes[p] = std::max<int64_t>(0, c.backward_working_bytes[p] - weights);
  }
  if (training) AddAccumulation(profile, c);
  return c;
}

std::vector<LiveValue> ValuesAcrossCut(const OrderCosts& costs, int cut) {
  std::vector<LiveValue> out;
  for (const LiveValue& v : costs.live_values) {
    if (v.born < cut && cut <= v.last_use) out.push_back(v);
  }
  std::sort(out.begin(), out.end(), [](const LiveValue& a, const LiveValue& b) { return a.value < b.value; });
  return out;
}

}  // namespace mp
