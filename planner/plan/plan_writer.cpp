// Writes a Plan as YAML, key by key in the order docs/plan-format.md lists
// them. Optional keys (split, calibration, why_not) are left out when empty
// so that a plain plan stays short; the reader accepts both.
#include "planner/plan/plan_writer.h"

#include <yaml-cpp/yaml.h>

#include "common/yaml_document.h"

namespace mp {
namespace {

template <typename T>
void KeyValue(YAML::Emitter& out, const char* key, const T& value) {
  out << YAML::Key << key << YAML::Value << value;
}

void WriteTensor(YAML::Emitter& out, const PlanTensor& t, const char* peer_key) {
  out << YAML::Flow << YAML::BeginMap;
  KeyValue(out, "value", t.value);
  KeyValue(out, "value_id", t.value_id);
  KeyValue(out, peer_key, t.peer);
  KeyValue(out, "dtype", t.dtype);
  out << YAML::Key << "shape" << YAML::Value;
  EmitFlowSeq(out, t.shape);
  KeyValue(out, "bytes", t.bytes);
  KeyValue(out, "gradient", t.gradient);
  out << YAML::EndMap;
}

void WriteStage(YAML::Emitter& out, const PlanStage& s, bool training) {
  out << YAML::BeginMap;
  KeyValue(out, "id", s.id);
  KeyValue(out, "device", s.device);
  if (!s.replica_devices.empty()) {
    out << YAML::Key << "replica_devices" << YAML::Value;
    EmitFlowSeq(out, s.replica_devices);
  }
  if (s.recompute) KeyValue(out, "recompute", true);
  out << YAML::Key << "nodes" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const NodeRange& r : s.nodes) out << YAML::Flow << YAML::BeginSeq << r.first << r.second << YAML::EndSeq;
  out << YAML::EndSeq;
  out << YAML::Key << "layers" << YAML::Value;
  EmitFlowSeq(out, s.layers);
  out << YAML::Key << "params" << YAML::Value << YAML::Flow << YAML::BeginMap;
  KeyValue(out, "count", s.param_count);
  KeyValue(out, "bytes", s.param_bytes);
  out << YAML::EndMap;
  out << YAML::Key << "receives" << YAML::Value;
  if (s.receives.empty()) out << YAML::Flow;  // "[]" rather than a dangling block
  out << YAML::BeginSeq;
  for (const PlanTensor& t : s.receives) WriteTensor(out, t, "from");
  out << YAML::EndSeq;
  out << YAML::Key << "sends" << YAML::Value;
  if (s.sends.empty()) out << YAML::Flow;
  out << YAML::BeginSeq;
  for (const PlanTensor& t : s.sends) WriteTensor(out, t, "to");
  out << YAML::EndSeq;
  out << YAML::Key << "predicted" << YAML::Value << YAML::Flow << YAML::BeginMap;
  KeyValue(out, "forward_ms", s.forward_ms);
  KeyValue(out, "backward_ms", s.backward_ms);
  if (s.input_backward_ms > 0 || s.weight_backward_ms > 0) {
    KeyValue(out, "input_backward_ms", s.input_backward_ms);
    KeyValue(out, "weight_backward_ms", s.weight_backward_ms);
  }
  KeyValue(out, "send_ms", s.send_ms);
  KeyValue(out, "send_gradients_ms", s.send_gradients_ms);
  KeyValue(out, "busy_fraction", s.busy_fraction);
  if (s.allreduce_ms > 0) KeyValue(out, "allreduce_ms", s.allreduce_ms);
  if (s.optimizer_ms > 0) KeyValue(out, "optimizer_ms", s.optimizer_ms);
  KeyValue(out, "static_bytes", s.static_bytes);
  if (training) KeyValue(out, "gradient_bytes", s.gradient_bytes);
  KeyValue(out, "activation_bytes", s.activation_bytes);
  if (s.transient_bytes > 0) KeyValue(out, "transient_bytes", s.transient_bytes);
  if (s.weight_transient_bytes >= 0) KeyValue(out, "weight_transient_bytes", s.weight_transient_bytes);
  if (s.forward_peak_bytes > 0) KeyValue(out, "forward_peak_bytes", s.forward_peak_bytes);
  if (s.weight_gradient_bytes > 0) KeyValue(out, "weight_gradient_bytes", s.weight_gradient_bytes);
  if (s.freed_by_i_bytes > 0) KeyValue(out, "freed_by_i_bytes", s.freed_by_i_bytes);
  if (s.recomputed_bytes > 0) KeyValue(out, "recomputed_bytes", s.recomputed_bytes);
  KeyValue(out, "peak_memory_bytes", s.peak_memory_bytes);
  out << YAML::EndMap;
  out << YAML::EndMap;
}

void WriteProgram(YAML::Emitter& out, const PlanProgram& program) {
  out << YAML::BeginMap;
  KeyValue(out, "device", program.device);
  std::vector<std::string> actions;
  for (const Action& a : program.actions) actions.push_back(FormatAction(a));
  out << YAML::Key << "actions" << YAML::Value;
  EmitFlowSeq(out, actions);
  out << YAML::EndMap;
}

void WriteAlternative(YAML::Emitter& out, const PlanCandidate& a) {
  out << YAML::Flow << YAML::BeginMap;
  KeyValue(out, "stages", a.stages);
  if (a.chunks > 1) KeyValue(out, "chunks", a.chunks);
  if (a.replicas > 1) KeyValue(out, "replicas", a.replicas);
  KeyValue(out, "microbatches", a.microbatches);
  KeyValue(out, "microbatch_size", a.microbatch_size);
  KeyValue(out, "schedule", ScheduleName(a.schedule));
  KeyValue(out, "feasible", a.feasible);
  KeyValue(out, "simulated", a.simulated);
  KeyValue(out, "step_ms", a.step_ms);
  KeyValue(out, "bottleneck_ms", a.bottleneck_ms);
  KeyValue(out, "bubble_fraction", a.bubble_fraction);
  KeyValue(out, "peak_memory_bytes", a.peak_memory_bytes);
  if (a.recomputing > 0) KeyValue(out, "recomputing", a.recomputing);
  if (!a.why_not.empty()) KeyValue(out, "why_not", a.why_not);
  if (a.tie) KeyValue(out, "tie", true);
  if (a.previous) KeyValue(out, "previous", true);
  if (a.fresh) KeyValue(out, "fresh", true);
  out << YAML::EndMap;
}

void WriteComparison(YAML::Emitter& out, const PlanCandidate& c) {
  out << YAML::Flow << YAML::BeginMap;
  KeyValue(out, "method", c.method);
  if (!c.split.empty()) KeyValue(out, "split", c.split);
  KeyValue(out, "stages", c.stages);
  if (c.chunks > 1) KeyValue(out, "chunks", c.chunks);
  KeyValue(out, "microbatches", c.microbatches);
  KeyValue(out, "microbatch_size", c.microbatch_size);
  KeyValue(out, "schedule", ScheduleName(c.schedule));
  KeyValue(out, "feasible", c.feasible);
  KeyValue(out, "step_ms", c.step_ms);
  KeyValue(out, "bottleneck_ms", c.bottleneck_ms);
  KeyValue(out, "bubble_fraction", c.bubble_fraction);
  if (!c.why_not.empty()) KeyValue(out, "why_not", c.why_not);
  out << YAML::EndMap;
}

}  // namespace

std::string PlanToYaml(const Plan& p) {
  YAML::Emitter out;
  out.SetDoublePrecision(9);
  out << YAML::BeginMap;
  KeyValue(out, "format", kPlanFormat);  // a v1 plan read in is written as v2
  out << YAML::Key << "model" << YAML::Value << YAML::BeginMap;
  KeyValue(out, "path", p.model.path);
  KeyValue(out, "sha256", p.model.sha256);
  KeyValue(out, "graph_fingerprint", p.model.graph_fingerprint);
  KeyValue(out, "nodes", p.model.nodes);
  out << YAML::EndMap;
  out << YAML::Key << "inputs" << YAML::Value << YAML::BeginSeq;
  for (const TensorSpec& spec : p.inputs) {
    out << YAML::Flow << YAML::BeginMap;
    KeyValue(out, "name", spec.name);
    KeyValue(out, "dtype", spec.dtype);
    out << YAML::Key << "shape" << YAML::Value;
    EmitFlowSeq(out, spec.shape);
    KeyValue(out, "batch_dim", spec.batch_dim);
    if (spec.has_range) {
      out << YAML::Key << "range" << YAML::Value;
      EmitFlowSeq(out, std::vector<int64_t>{spec.low, spec.high});
    }
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  KeyValue(out, "mode", p.training ? "train" : "infer");
  KeyValue(out, "batch", p.batch);
  if (p.replicas > 1) {
    KeyValue(out, "replicas", p.replicas);
    out << YAML::Key << "replica_link" << YAML::Value << YAML::Flow << YAML::BeginMap;
    KeyValue(out, "bandwidth_bytes_per_s", p.replica_link.bandwidth_bytes_per_s);
    KeyValue(out, "latency_ms", p.replica_link.latency_ms);
    out << YAML::EndMap;
  }
  KeyValue(out, "microbatches", p.microbatches);
  KeyValue(out, "microbatch_size", p.microbatch_size);
  KeyValue(out, "schedule", ScheduleName(p.schedule));
  KeyValue(out, "partitioner", p.partitioner);
  if (!p.split.empty()) KeyValue(out, "split", p.split);
  if (!p.cut.empty()) KeyValue(out, "cut", p.cut);
  if (p.objective != Objective::kStep) KeyValue(out, "objective", ObjectiveName(p.objective));
  if (p.training && !p.optimizer.empty()) KeyValue(out, "optimizer", p.optimizer);
  KeyValue(out, "optimizer_state_factor", p.optimizer_state_factor);
  out << YAML::Key << "devices" << YAML::Value << YAML::BeginSeq;
  for (const PlanDevice& d : p.devices) {
    out << YAML::Flow << YAML::BeginMap;
    KeyValue(out, "id", d.id);
    KeyValue(out, "type", d.type);
    KeyValue(out, "index", d.index);
    KeyValue(out, "name", d.name);
    KeyValue(out, "memory_bytes", d.memory_bytes);
    if (d.memory_headroom > 0) KeyValue(out, "memory_headroom", d.memory_headroom);
    KeyValue(out, "speed", d.speed);
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "links" << YAML::Value;
  if (p.links.empty()) out << YAML::Flow;
  out << YAML::BeginSeq;
  for (size_t i = 0; i < p.links.size(); ++i) {
    out << YAML::Flow << YAML::BeginMap;
    KeyValue(out, "from", int(i));
    KeyValue(out, "to", int(i) + 1);
    KeyValue(out, "bandwidth_bytes_per_s", p.links[i].bandwidth_bytes_per_s);
    KeyValue(out, "latency_ms", p.links[i].latency_ms);
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "stages" << YAML::Value << YAML::BeginSeq;
  for (const PlanStage& s : p.stages) WriteStage(out, s, p.training);
  out << YAML::EndSeq;
  out << YAML::Key << "programs" << YAML::Value << YAML::BeginSeq;
  for (const PlanProgram& program : p.programs) WriteProgram(out, program);
  out << YAML::EndSeq;
  out << YAML::Key << "predicted" << YAML::Value << YAML::BeginMap;
  KeyValue(out, "step_ms", p.predicted.step_ms);
  KeyValue(out, "bottleneck_ms", p.predicted.bottleneck_ms);
  KeyValue(out, "bubble_fraction", p.predicted.bubble_fraction);
  KeyValue(out, "samples_per_s", p.predicted.samples_per_s);
  KeyValue(out, "one_device_step_ms", p.predicted.one_device_step_ms);
  KeyValue(out, "speedup_vs_one_device", p.predicted.speedup_vs_one_device);
  if (p.replicas > 1) KeyValue(out, "allreduce_ms", p.predicted.allreduce_ms);
  if (p.predicted.optimizer_ms > 0) KeyValue(out, "optimizer_ms", p.predicted.optimizer_ms);
  if (p.predicted.step_high_ms > 0) {
    out << YAML::Key << "step_band_ms" << YAML::Value;
    EmitFlowSeq(out, std::vector<double>{p.predicted.step_low_ms, p.predicted.step_high_ms});
  }
  if (!p.predicted.device_peak_memory_bytes.empty()) {
    out << YAML::Key << "device_peak_memory_bytes" << YAML::Value;
    EmitFlowSeq(out, p.predicted.device_peak_memory_bytes);
  }
  out << YAML::EndMap;
  out << YAML::Key << "profile" << YAML::Value << YAML::BeginMap;
  KeyValue(out, "source", p.profile.source);
  KeyValue(out, "device", p.profile.device);
  if (!p.profile.file.empty()) KeyValue(out, "file", p.profile.file);
  KeyValue(out, "threads", p.profile.threads);
  out << YAML::Key << "microbatch_sizes" << YAML::Value;
  EmitFlowSeq(out, p.profile.microbatch_sizes);
  KeyValue(out, "coverage", p.profile.coverage);
  KeyValue(out, "backward_coverage", p.profile.backward_coverage);
  if (!p.profile.calibration.empty()) KeyValue(out, "calibration", p.profile.calibration);
  if (!p.profile.shared_slowdown.empty()) {
    out << YAML::Key << "shared_slowdown" << YAML::Value;
    EmitFlowSeq(out, p.profile.shared_slowdown);
  }
  if (p.profile.reference_ms > 0) KeyValue(out, "reference_ms", p.profile.reference_ms);
  if (p.profile.step_overhead_ms > 0) KeyValue(out, "step_overhead_ms", p.profile.step_overhead_ms);
  if (p.profile.replica_wait_share > 0) KeyValue(out, "replica_wait_share", p.profile.replica_wait_share);
  out << YAML::EndMap;
  out << YAML::Key << "alternatives" << YAML::Value << YAML::BeginSeq;
  for (const PlanCandidate& a : p.alternatives) WriteAlternative(out, a);
  out << YAML::EndSeq;
  out << YAML::Key << "comparisons" << YAML::Value;
  if (p.comparisons.empty()) out << YAML::Flow;
  out << YAML::BeginSeq;
  for (const PlanCandidate& c : p.comparisons) WriteComparison(out, c);
  out << YAML::EndSeq;
  out << YAML::Key << "warnings" << YAML::Value;
  if (p.warnings.empty()) out << YAML::Flow;
  out << YAML::BeginSeq;
  for (const std::string& w : p.warnings) out << w;
  out << YAML::EndSeq;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace mp
