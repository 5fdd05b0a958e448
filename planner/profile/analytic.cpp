// Roofline estimates (Williams, Waterman and Patterson, "Roofline: an
// insightful visual performance model", CACM 2009) per canonical node,
// with achievable rather than peak rates (the efficiencies) and a fixed
// per-op launch cost, which dominates small micro-batches on GPUs. The
// backward of conv/matmul costs two forward-sized products (grad input,
// grad weight), hence 2x, and one where its weights are frozen (grad input
// only); elementwise backwards read and write about twice the forward's
// bytes; a node no gradient reaches has none.
#include "planner/profile/analytic.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "planner/profile/timer.h"

namespace mp {
namespace {

bool IsConv(const std::string& kind) { return kind.find("conv") != std::string::npos; }

std::string NodeDtype(const OpGraph& graph, int node) {
  for (int v : graph.nodes[node].outputs)
    if (!graph.values[v].dtype.empty()) return graph.values[v].dtype;
  return "float32";
}

// Nodes whose backward runs in training: floating outputs reachable from
// a floating parameter that is not frozen (a frozen backbone's layers run
// no backward: their estimate charged one until the thirty-third
// session), and not gradient-free by the graph's own analysis (what a
// torch.no_grad() body or an aten::detach makes, gradient_free.h).
std::vector<bool> OnGradientPath(const OpGraph& graph) {
  std::vector<bool> needs_grad(graph.values.size(), false);
  auto floating = [&](const OpValue& v) {
    if (!v.dtype.empty()) return v.dtype.rfind("float", 0) == 0 || v.dtype == "bfloat16";
    return v.type.find("Tensor") != std::string::npos;  // lists and tuples of tensors
  };
  for (int p : graph.params) needs_grad[p] = floating(graph.values[p]) && !graph.values[p].frozen;
  std::vector<bool> on_path(graph.nodes.size(), false);
  for (const auto& node : graph.nodes) {
    const bool any = std::any_of(node.inputs.begin(), node.inputs.end(), [&](int v) { return needs_grad[v]; });
    const bool reached = node.outputs.empty() || std::any_of(node.outputs.begin(), node.outputs.end(), [&](int v) {
      return !graph.values[v].gradient_free;
    });
    if (!any || !reached) continue;
    on_path[node.id] = true;
    for (int v : node.outputs) needs_grad[v] = floating(graph.values[v]);
  }
  return on_path;
}

// The optimizer's step as executor/optimizer.cpp runs it: multi-tensor
// operations over all of a device's trained parameters, and the bytes they
// read and write in all, as a multiple of the parameters'.
struct OptimizerWork {
  const char* name;
  int operations;
  int passes;
};
constexpr OptimizerWork kOptimizerWork[] = {
    {"sgd", 1, 3},        // p += -lr g
    {"momentum", 3, 8},   // buf *= m; buf += g; p += -lr buf
    {"adam", 8, 21},      // m, v in two operations each; sqrt, divide, add eps; addcdiv
    {"adamw", 9, 23}};    // and the decay of p first

// A multi-tensor operation launches a kernel for every so many tensors or
// elements, whichever fills first (PyTorch's multi_tensor_apply: 110
// tensors a launch with one list down to 30 with five, the optimizers'
// operations take one to three; 320 blocks of 65,536 elements).
constexpr double kTensorsPerLaunch = 48;
constexpr double kElementsPerLaunch = 320.0 * 65536;

// Per optimizer, in ms a MiB of trained parameters: their traffic at the
// device's bandwidth and each operation's launches, spread over the
// model's trained bytes.
std::map<std::string, double> OptimizerRates(const OpGraph& graph, const DeviceProfile& device) {
  int64_t tensors = 0;
  double mib = 0, elements = 0;
  for (const OpValue& v : graph.values) {
    if (!v.is_param || v.frozen || v.consumers.empty()) continue;
    ++tensors;
    mib += double(v.bytes) / (1 << 20);
    double numel = 1;
    for (int64_t d : v.shape) numel *= double(d);
    elements += numel;
  }
  std::map<std::string, double> rates;
  if (tensors == 0 || mib <= 0) return rates;
  const double mib_ms = 1000.0 * double(1 << 20) / (device.memory_bandwidth * device.memory_efficiency);
  const double launches =
      std::max(std::ceil(double(tensors) / kTensorsPerLaunch), std::ceil(elements / kElementsPerLaunch));
  for (const OptimizerWork& w : kOptimizerWork) {
    rates[w.name] = w.passes * mib_ms + w.operations * launches * device.launch_overhead_us / 1000.0 / mib;
  }
  return rates;
}

double RooflineMs(double flops, double bytes, double peak, const DeviceProfile& device) {
  if (flops <= 0 && bytes <= 0) return 0;
  const double compute_s = flops / (peak * device.compute_efficiency);
  const double memory_s = bytes / (device.memory_bandwidth * device.memory_efficiency);
  return device.launch_overhead_us / 1000.0 + 1000.0 * std::max(compute_s, memory_s);
}

}  // namespace

double PeakFlopsFor(const DeviceProfile& device, const std::string& kind, const std::string& dtype) {
  if (dtype == "float16" && device.fp16_flops > 0) return device.fp16_flops;
  if (dtype == "bfloat16" && device.bf16_flops > 0) return device.bf16_flops;
  if (dtype == "float32" && IsConv(kind) && device.tf32_flops > 0) return device.tf32_flops;
  return device.fp32_flops;
}

Profile AnalyticProfile(const Profile& shapes, const OpGraph& graph, const DeviceProfile& device) {
  if (shapes.nodes.size() != graph.nodes.size())
    throw InternalError(Concat("profile has ", shapes.nodes.size(), " nodes, graph ", graph.nodes.size()));
  Profile profile = shapes;
  profile.source = "analytic";
  profile.device = device.name;
  profile.threads = 0;
  profile.warmup = profile.repeats = 0;
  profile.whole_forward_ms = profile.whole_backward_ms = 0;
  profile.coverage = profile.backward_coverage = 0;
  const auto on_path = OnGradientPath(graph);
  for (auto& node : profile.nodes) {
    const double peak = PeakFlopsFor(device, node.kind, NodeDtype(graph, node.id));
    node.forward_ms.assign(profile.microbatch_sizes.size(), 0);
    node.spread.assign(profile.microbatch_sizes.size(), 0);
    node.backward_ms.assign(profile.training ? profile.microbatch_sizes.size() : 0, 0);
    node.input_backward_ms.clear();  // estimated from backward_ms (InputBackwardMs)
    node.weight_backward_ms.clear();
    const bool input_only = ReadsOnlyFrozen(graph, graph.nodes[node.id]);  // one product back, no W
    for (size_t i = 0; i < profile.microbatch_sizes.size(); ++i) {
      node.forward_ms[i] = RooflineMs(node.flops[i], node.bytes_moved[i], peak, device);
      if (profile.training && on_path[node.id]) {
        const double times = input_only ? 1 : 2;
        node.backward_ms[i] = RooflineMs(times * node.flops[i], times * node.bytes_moved[i], peak, device);
      }
    }
    if (profile.training && input_only) {  // I is all of it
      node.input_backward_ms = node.backward_ms;
      node.weight_backward_ms.assign(node.backward_ms.size(), 0);
    }
  }
  profile.optimizer_ms_per_mib.clear();
  if (profile.training) profile.optimizer_ms_per_mib = OptimizerRates(graph, device);
  return profile;
}

DeviceProfile CalibrateDevice(const DeviceProfile& device, const Profile& measured, const OpGraph& graph) {
  if (measured.nodes.size() != graph.nodes.size() || measured.microbatch_sizes.empty())
    throw InternalError("calibration needs a measured profile of this graph");
  const size_t last = measured.microbatch_sizes.size() - 1;
  std::vector<double> free_ms;
  double peak_compute_s = 0, measured_compute_s = 0, peak_memory_s = 0, measured_memory_s = 0;
  for (const auto& node : measured.nodes) {
    const double ms = node.forward_ms[last];
    if (ms <= 0) continue;
    if (node.flops[last] <= 0 && node.bytes_moved[last] <= 0) {
      free_ms.push_back(ms);
      continue;
    }
    const double compute_s = node.flops[last] / PeakFlopsFor(device, node.kind, NodeDtype(graph, node.id));
    const double memory_s = node.bytes_moved[last] / device.memory_bandwidth;
    if (compute_s >= memory_s) {
      peak_compute_s += compute_s;
      measured_compute_s += ms / 1000.0;
    } else {
      peak_memory_s += memory_s;
      measured_memory_s += ms / 1000.0;
    }
  }
  DeviceProfile calibrated = device;
  if (!free_ms.empty()) calibrated.launch_overhead_us = 1000.0 * Quantile(free_ms, 0.5);
  if (measured_compute_s > 0)
    calibrated.compute_efficiency = std::clamp(peak_compute_s / measured_compute_s, 1e-4, 1.0);
  if (measured_memory_s > 0)
    calibrated.memory_efficiency = std::clamp(peak_memory_s / measured_memory_s, 1e-4, 1.0);
  return calibrated;
}

}  // namespace mp
