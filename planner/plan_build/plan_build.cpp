// BuildPlan: the Partition and SimResult of the chosen alternative become
// the plan's stages; tensor shapes are the graph's full-batch shapes with the
// batch dimension set to the micro-batch size (values whose bytes scale with
// the batch). Warnings cover what a user would otherwise find out by running:
// BatchNorm statistics per micro-batch, a pipeline slower than one device, a
// stage near its memory limit, a profile that does not add up.
#include "planner/plan_build/plan_build.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "common/byte_size.h"
#include "common/error.h"

namespace mp {
namespace {

std::string TopLevel(const std::string& layer) { return layer.substr(0, layer.find('.')); }

std::string SecondLevel(const std::string& layer) {
  const size_t dot = layer.find('.');
  if (dot == std::string::npos) return layer;
  const size_t next = layer.find('.', dot + 1);
  return layer.substr(0, next);
}

PlanTensor MakeTensor(const OpGraph& graph, const Profile& profile, const CutTensor& cut, int64_t microbatch) {
  const OpValue& value = graph.values[cut.value];
  PlanTensor t;
  t.value = value.name;
  t.value_id = cut.value;
  t.peer = cut.peer;
  t.dtype = value.dtype;
  t.bytes = cut.bytes;
  t.gradient = cut.carries_gradient;
  t.shape = value.shape;
  const bool scales = cut.value < int(profile.values.size()) && profile.values[cut.value].per_sample > 0;
  const int64_t element = DtypeBytes(value.dtype);
  if (!scales || element == 0 || profile.batch <= 0) return t;
  // The batch dimension: the first one that, scaled from the full batch to
  // the micro-batch, gives the value's bytes ([B, C, H, W], [B*T, H], and
  // [layers, B, H] unless layers is a multiple of B too).
  for (size_t d = 0; d < t.shape.size(); ++d) {
    if (t.shape[d] == 0 || t.shape[d] % profile.batch != 0) continue;
    std::vector<int64_t> shape = t.shape;
    shape[d] = t.shape[d] / profile.batch * microbatch;
    int64_t numel = 1;
    for (int64_t n : shape) numel *= n;
    if (numel * element == cut.bytes) {
      t.shape = shape;
      break;
    }
  }
  return t;
}

// Elements of the parameters; a parameter of unknown shape counts 0.
int64_t ParamCount(const OpGraph& graph, const std::set<int>& params) {
  int64_t count = 0;
  for (int v : params) {
    const OpValue& value = graph.values[v];
    if (value.bytes == 0) continue;
    int64_t n = 1;
    for (int64_t d : value.shape) n *= d;
    count += n;
  }
  return count;
}

std::string Percent(double fraction) { return Concat(std::lround(fraction * 100), "%"); }

std::string Times(double ratio) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2fx", ratio);
  return text;
}

std::string Ms(double ms) {
  char text[32];
  std::snprintf(text, sizeof text, ms < 10 ? "%.2f ms" : "%.0f ms", ms);
  return text;
}

// The warning that the plan's predicted step is slower than one device's, or "".
std::string SlowerThanOneDeviceWarning(const Plan& plan) {
  if (plan.stages.size() < 2 || plan.predicted.one_device_step_ms <= 0 ||
      plan.predicted.step_ms <= plan.predicted.one_device_step_ms) {
    return "";
  }
  const size_t devices = plan.programs.empty() ? plan.stages.size() : plan.programs.size();
  const std::string over = devices == plan.stages.size()
                               ? Concat(devices, " stages")
                               : Concat(devices, " devices with ", ScheduleName(plan.schedule));
  return Concat("pipelining over ", over, " is predicted slower than one device (", Ms(plan.predicted.step_ms), " vs ",
                Ms(plan.predicted.one_device_step_ms), " a step); --stages 1 would be faster");
}

std::vector<std::string> Warnings(const OpGraph& graph, const Profile& profile, const Plan& plan) {
  std::vector<std::string> warnings;
  if (plan.training && plan.microbatches * plan.replicas > 1) {
    const bool batch_norm = std::any_of(graph.nodes.begin(), graph.nodes.end(),
                                        [](const OpNode& n) { return n.kind == "aten::batch_norm"; });
    if (batch_norm) {
      warnings.push_back(Concat("BatchNorm in training computes its statistics over each micro-batch of ",
                                plan.microbatch_size, " samples, not over the batch of ", plan.batch,
                                ": results differ from one-device training"));
    }
  }
  for (const Profile::LeftOutSize& left : profile.sizes_left_out) {
    warnings.push_back(Concat("micro-batches of ", left.size, " sample", left.size == 1 ? "" : "s",
                              " not planned: the model fails at that size (", left.why, ")"));
  }
  if (std::string slower = SlowerThanOneDeviceWarning(plan); !slower.empty()) warnings.push_back(slower);
  for (const PlanStage& stage : plan.stages) {
    const int64_t limit = plan.devices[stage.device].memory_bytes;
    if (limit > 0 && stage.peak_memory_bytes > 0.9 * double(limit)) {
      warnings.push_back(Concat("stage ", stage.id, " is predicted to use ", FormatBytes(stage.peak_memory_bytes),
                                " of device ", stage.device, "'s ", FormatBytes(limit), " (",
                                Percent(double(stage.peak_memory_bytes) / double(limit)),
                                "): little room for the allocator's fragmentation"));
    }
  }
  // Pinned CPU workers whose cores ran apart (common/cpu_affinity.h). Not
  // charged: on this project's VM the faster of two vCPUs changed every few
  // seconds to minutes, so the profile's speeds did not hold at the run.
  if (plan.stages.size() > 1) {
    const std::vector<double>& speeds = profile.worker_speed;
    size_t slowest = 0;
    for (size_t w = 0; w < speeds.size() && w < plan.devices.size(); ++w)
      if (std::abs(std::log(speeds[w])) > std::abs(std::log(speeds[slowest]))) slowest = w;
    if (slowest > 0 && std::abs(std::log(speeds[slowest])) > std::log(1.1)) {
      warnings.push_back(Concat("CPU worker ", slowest, "'s cores ran the model in ", Times(speeds[slowest]),
                                " worker 0's time while profiling; the plan charges every worker alike (cores "
                                "that differ may not stay so: docs/profile.md), and mpexec's cores line says how "
                                "each worker's cores run then"));
    }
  }
  // The node times once scaled to the whole graph (WholeScale, at most
  // 1.4x either way), where the profile did.
  const double covered =
      profile.coverage * (profile.whole_scale.empty() ? 1.0 : profile.whole_scale.back().at(0));
  if (covered > 0 && std::abs(covered - 1) > 0.15) {
    warnings.push_back(Concat("the per-node profile adds up to ", Percent(covered),
                              " of the whole-graph forward time: predictions may be off by as much"));
  }
  return warnings;
}

}  // namespace

std::vector<std::string> StageLayers(const OpGraph& graph, const std::vector<int>& stage_nodes) {
  // Constants say nothing about where a layer runs: every stage that needs
  // one clones it, wherever the order happened to put it.
  const auto counts = [&](const OpNode& n) {
    if (n.layer.empty()) return false;
    return std::any_of(n.outputs.begin(), n.outputs.end(),
                       [&](int v) { return !graph.values[v].rematerializable; });
  };
  std::map<std::string, int> nodes_in_top;  // all nodes of each top-level layer
  for (const OpNode& n : graph.nodes) {
    if (counts(n)) ++nodes_in_top[TopLevel(n.layer)];
  }
  std::map<std::string, int> stage_in_top;
  for (int id : stage_nodes) {
    if (counts(graph.nodes[id])) ++stage_in_top[TopLevel(graph.nodes[id].layer)];
  }
  std::vector<std::string> layers;
  for (int id : stage_nodes) {
    if (!counts(graph.nodes[id])) continue;
    const std::string& layer = graph.nodes[id].layer;
    const std::string top = TopLevel(layer);
    const std::string name = stage_in_top[top] == nodes_in_top[top] ? top : SecondLevel(layer);
    if (std::find(layers.begin(), layers.end(), name) == layers.end()) layers.push_back(name);
  }
  return layers;
}

double OneDeviceStepMs(const OpGraph& graph, const Profile& profile, const Cluster& cluster,
                       const PlanRequest& request) {
  PlanRequest one = request;
  one.stages = 1;
  one.microbatches = 1;
  one.method = "dp";
  one.schedule = request.training ? ScheduleKind::kGPipe : ScheduleKind::kForwardOnly;
  one.chunks = 0;  // --chunks is interleaved-1f1b's, not one device's
  one.recompute = Recompute::kNever;  // unlimited memory: the plain step
  Device device = cluster.devices.front();
  device.memory_bytes = kUnlimitedMemory;
  const int64_t batch = request.batch > 0 ? request.batch : profile.batch;
  if (!CanInterpolate(profile, batch)) return 0;
  Cluster one_device = UniformCluster(1, device);
  one_device.step_overhead_ms = cluster.step_overhead_ms;  // mpexec's one worker pays it too
  one_device.optimizer_ms_per_mib = cluster.optimizer_ms_per_mib;
  one_device.optimizer_slowdown = cluster.optimizer_slowdown;
  return SearchPlan(graph, profile, one_device, one).predicted.step_ms;
}

Plan BuildPlan(const OpGraph& graph, const Profile& profile, const Cluster& cluster, const PlanRequest& request,
               const SearchResult& result, const PlanSource& source) {
  const Partition& partition = result.partition;
  const SimResult& sim = result.predicted;
  Plan plan;
  plan.model.path = source.model_path;
  plan.model.sha256 = source.model_sha256;
  plan.model.graph_fingerprint = graph.fingerprint;
  plan.model.nodes = int(graph.nodes.size());
  plan.training = request.training;
  plan.batch = request.batch > 0 ? request.batch : profile.batch;
  plan.inputs = WithBatch(profile.inputs, plan.batch);
  plan.replicas = cluster.replicas;
  if (plan.replicas > 1) plan.replica_link = {cluster.replica_link.bandwidth_bytes_per_s, cluster.replica_link.latency_ms};
  plan.microbatches = partition.microbatches;
  plan.microbatch_size = MicrobatchSize(ReplicaBatch(plan), plan.microbatches);
  plan.schedule = partition.schedule;
  plan.partitioner = partition.method;
  plan.cut = partition.cut;
  plan.objective = request.objective;
  if (partition.method == "layers") plan.split = request.layer_split;
  if (plan.training) plan.optimizer = request.optimizer;
  plan.optimizer_state_factor = OptimizerStateTensors(request.optimizer);
  plan.devices = source.devices;
  for (PlanDevice& d : plan.devices) {
    if (d.memory_bytes == kUnlimitedMemory) d.memory_bytes = 0;
  }
  const int K = int(partition.stages.size());
  for (int b = 0; b + 1 < K; ++b) {
    const Link link = LinkBetween(cluster, partition.stages[b].device, partition.stages[b + 1].device);
    plan.links.push_back({link.bandwidth_bytes_per_s, link.latency_ms});
  }
  for (int s = 0; s < K; ++s) {
    const Stage& st = partition.stages[s];
    PlanStage ps;
    ps.id = s;
    ps.device = st.device;
    if (plan.replicas > 1) {  // replica r on the r-th block of the cluster's devices
      for (int r = 0; r < plan.replicas; ++r) ps.replica_devices.push_back(r * int(cluster.devices.size()) + st.device);
    }
    ps.nodes = ToRanges(st.nodes);
    ps.layers = StageLayers(graph, st.nodes);
    std::set<int> params;
    for (int id : st.nodes) {
      for (int v : graph.nodes[id].inputs) {
        if (graph.values[v].is_param) params.insert(v);
      }
    }
    ps.param_count = ParamCount(graph, params);
    for (int v : params) ps.param_bytes += graph.values[v].bytes;
    for (const CutTensor& c : st.receives) ps.receives.push_back(MakeTensor(graph, profile, c, plan.microbatch_size));
    for (const CutTensor& c : st.sends) ps.sends.push_back(MakeTensor(graph, profile, c, plan.microbatch_size));
    ps.forward_ms = st.forward_ms;
    ps.backward_ms = st.backward_ms;
    if (SplitsBackward(partition.schedule) && !st.whole_backward) {  // else it runs B
      ps.input_backward_ms = st.input_backward_ms;
      ps.weight_backward_ms = st.weight_backward_ms;
    }
    ps.send_ms = s + 1 < K ? partition.transfers[s].forward_ms : 0;
    ps.send_gradients_ms = s > 0 ? partition.transfers[s - 1].backward_ms : 0;
    ps.busy_fraction = sim.step_ms > 0 ? sim.busy_ms[s] / sim.step_ms : 0;
    ps.allreduce_ms = st.allreduce_ms;
    plan.predicted.allreduce_ms = std::max(plan.predicted.allreduce_ms, st.allreduce_ms);
    ps.optimizer_ms = st.optimizer_ms;
    ps.static_bytes = st.static_bytes;
    ps.gradient_bytes = st.gradient_bytes;
    ps.activation_bytes = st.activation_bytes;
    ps.transient_bytes = st.transient_bytes;
    if (SplitsBackward(partition.schedule) && !st.whole_backward) ps.weight_transient_bytes = st.weight_transient_bytes;
    ps.forward_peak_bytes = st.forward_peak_bytes;
    ps.freed_by_i_bytes = st.freed_by_i_bytes;
    ps.weight_gradient_bytes = st.weight_gradient_bytes;
    ps.recompute = st.recompute;
    ps.recomputed_bytes = st.recomputed_bytes;
    ps.peak_memory_bytes = sim.peak_memory_bytes[s];
    ps.program = result.schedule.DeviceOf(s);
    plan.stages.push_back(std::move(ps));
  }
  plan.programs.resize(result.schedule.Devices());
  for (int d = 0; d < result.schedule.Devices(); ++d) plan.programs[d].actions = result.schedule.actions[d];
  for (const PlanStage& ps : plan.stages) plan.programs[ps.program].device = ps.device;
  plan.predicted.step_ms = sim.step_ms;
  for (double ms : sim.optimizer_ms) plan.predicted.optimizer_ms = std::max(plan.predicted.optimizer_ms, ms);
  plan.predicted.device_peak_memory_bytes = sim.device_peak_memory_bytes;
  if (const Band band = PredictionBand(profile, static_cast<int>(partition.stages.size())); !band.Empty()) {
    plan.predicted.step_low_ms = band.low * sim.step_ms;
    plan.predicted.step_high_ms = band.high * sim.step_ms;
  }
  plan.predicted.bottleneck_ms = partition.bottleneck_ms;
  plan.predicted.bubble_fraction = sim.bubble_fraction;
  plan.predicted.samples_per_s = sim.step_ms > 0 ? double(plan.batch) * 1000.0 / sim.step_ms : 0;
  plan.predicted.one_device_step_ms = OneDeviceStepMs(graph, profile, cluster, request);
  if (plan.predicted.one_device_step_ms > 0 && sim.step_ms > 0) {
    plan.predicted.speedup_vs_one_device = plan.predicted.one_device_step_ms / sim.step_ms;
  }
  plan.profile.source = profile.source;
  plan.profile.device = profile.device;
  plan.profile.file = source.profile_file;
  plan.profile.threads = profile.threads;
  plan.profile.microbatch_sizes = profile.microbatch_sizes;
  plan.profile.coverage = profile.coverage;
  plan.profile.backward_coverage = profile.backward_coverage;
  plan.profile.calibration = source.calibration;
  plan.profile.shared_slowdown = SharedSlowdownFor(cluster, profile, plan.microbatch_size);  // as the search used them
  plan.profile.reference_ms = profile.reference_ms;
  plan.profile.step_overhead_ms = partition.step_overhead_ms;
  plan.profile.replica_wait_share = partition.replica_wait_share;
  plan.alternatives = result.alternatives;
  plan.warnings = Warnings(graph, profile, plan);
  return plan;
}

}  // namespace mp
