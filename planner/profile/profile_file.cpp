// The profile file format (mpplan-profile/v1): a header with the key
// (fingerprint, inputs, mode, device, threads) and the timing setup, then
// one flow-style line per node and a list of [per_sample, fixed] byte pairs
// per value, so a diff of two profiles reads node by node.
#include "planner/profile/profile_file.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "common/error.h"
#include "common/yaml_cursor.h"
#include "common/yaml_document.h"
#include "planner/graph/input_spec.h"
#include "planner/profile/device_profile.h"

namespace mp {
namespace {

// The per-size byte lists of a node (since 2026-11-28), as written and read.
const std::pair<const char*, std::vector<int64_t> NodeCost::*> kPerSizeBytes[] = {
    {"forward_working_bytes", &NodeCost::forward_working_bytes},
    {"backward_working_bytes", &NodeCost::backward_working_bytes}};

std::vector<double> FactorsAtLeastOne(const YamlCursor& c) {
  std::vector<double> out;
  const int n = c.ExpectList();
  for (int i = 0; i < n; ++i) out.push_back(c[i].NumberIn(1, YamlCursor::kNoLimit, "a factor"));
  return out;
}

Band ReadBand(const YamlCursor& c) {
  c.ExpectList(2);
  const Band b{c[0].Number(), c[1].Number()};
  if (!(b.low > 0 && b.low <= 1 && b.high >= 1 && std::isfinite(b.high))) {
    c.Fail(Concat("expected [low, high] with 0 < low <= 1 <= high, found [", b.low, ", ", b.high, "]"));
  }
  return b;
}

// [per_sample, fixed] bytes.
ValueBytes ReadBytes(const YamlCursor& c) {
  c.ExpectList(2);
  return {c[0].Int(), c[1].Int()};
}

TensorSpec ReadInput(const YamlCursor& c) {
  c.ExpectMap({"name", "spec", "batch_dim"}, {"range"});
  TensorSpec spec;
  try {
    spec = ParseTensorSpec(c["spec"].String());
  } catch (const InputError& e) {
    c["spec"].Fail(e.what());
  }
  spec.name = c["name"].String();
  spec.batch_dim = int(c["batch_dim"].Int());
  if (c.Has("range")) {
    const std::vector<int64_t> range = c["range"].IntList();
    if (range.size() != 2) c["range"].Fail(Concat("expected [low, high], found ", range.size(), " entries"));
    spec.has_range = true;
    spec.low = range[0];
    spec.high = range[1];
  }
  return spec;
}

NodeCost ReadNode(const YamlCursor& c, size_t id, size_t sizes, bool training) {
  // autograd_nodes: written on 2026-11-27 for a charge mpexec no longer
  // pays (its W's engine walk, docs/profile.md); read and ignored.
  c.ExpectMap({"id", "kind", "layer", "forward_ms", "backward_ms", "spread", "flops", "bytes_moved", "output_bytes",
               "param_bytes"},
              {"input_backward_ms", "weight_backward_ms", "autograd_nodes", "kept_bytes", "weight_kept_bytes",
               "forward_working_bytes", "backward_working_bytes"});
  NodeCost n;
  n.id = int(c["id"].Int());
  if (n.id != int(id)) c["id"].Fail(Concat("expected ", id, ", found ", n.id));
  n.kind = c["kind"].String();
  n.layer = c["layer"].String();
  // I and W are optional (profiles before 2026-11-24 have neither): both or none.
  if (c.Has("input_backward_ms") != c.Has("weight_backward_ms")) {
    c.Fail("expected input_backward_ms and weight_backward_ms together");
  }
  const std::pair<const char*, std::vector<double>*> lists[] = {
      {"forward_ms", &n.forward_ms}, {"backward_ms", &n.backward_ms}, {"spread", &n.spread},
      {"flops", &n.flops}, {"bytes_moved", &n.bytes_moved},
      {"input_backward_ms", &n.input_backward_ms}, {"weight_backward_ms", &n.weight_backward_ms}};
  for (const auto& [key, list] : lists) {
    if (!c.Has(key)) continue;  // an optional one: the required ones are there (ExpectMap)
    const YamlCursor entries = c[key];
    *list = entries.NumberList();
    const bool may_be_empty = list == &n.backward_ms && !training;
    if (list->size() != sizes && !(may_be_empty && list->empty())) {
      entries.Fail(Concat(list->size(), " entries for ", sizes, " micro-batch sizes"));
    }
  }
  const ValueBytes out = ReadBytes(c["output_bytes"]);
  n.output_bytes_per_sample = out.per_sample;
  n.output_bytes_fixed = out.fixed;
  n.param_bytes = c["param_bytes"].Int();
  if (c.Has("kept_bytes")) n.kept = ReadBytes(c["kept_bytes"]);  // measured since 2026-11-27
  if (c.Has("weight_kept_bytes")) n.weight_kept = ReadBytes(c["weight_kept_bytes"]);  // since 2026-11-28
  for (const auto& [key, member] : kPerSizeBytes) {
    if (!c.Has(key)) continue;
    std::vector<int64_t>* list = &(n.*member);
    *list = c[key].IntList();
    if (list->size() != sizes) c[key].Fail(Concat(list->size(), " entries for ", sizes, " micro-batch sizes"));
    for (int64_t bytes : *list) {
      if (bytes < 0) c[key].Fail(Concat("expected bytes >= 0, found ", bytes));
    }
  }
  return n;
}

// The contention probe's keys (contention.h), all optional together.
void ReadSharedSlowdown(const YamlCursor& root, Profile& p) {
  p.shared_slowdown = FactorsAtLeastOne(root["shared_slowdown"]);
  p.shared_slowdown_microbatch = root["shared_slowdown_microbatch"].Int();
  if (root.Has("shared_slowdown_sizes")) {
    const YamlCursor sizes = root["shared_slowdown_sizes"];
    p.shared_slowdown_sizes = sizes.IntList();
    const YamlCursor rows = root["shared_slowdown_by_size"];
    const int n = rows.ExpectList(int(p.shared_slowdown_sizes.size()));
    for (int i = 0; i < n; ++i) {
      const int64_t m = p.shared_slowdown_sizes[i];
      if (m < 1 || (i > 0 && m <= p.shared_slowdown_sizes[i - 1])) {
        sizes[i].Fail(Concat("expected ascending sizes >= 1, found ", m));
      }
      p.shared_slowdown_by_size.push_back(FactorsAtLeastOne(rows[i]));
      if (p.shared_slowdown_by_size.back().size() != p.shared_slowdown.size()) {
        rows[i].Fail(Concat(p.shared_slowdown_by_size.back().size(), " factors, shared_slowdown has ",
                            p.shared_slowdown.size()));
      }
    }
    if (root.Has("process_slowdown_by_size")) {
      const YamlCursor process_rows = root["process_slowdown_by_size"];
      for (int i = 0, m = process_rows.ExpectList(n); i < m; ++i) {
        p.process_slowdown_by_size.push_back(FactorsAtLeastOne(process_rows[i]));
        if (p.process_slowdown_by_size.back().size() != p.shared_slowdown.size()) {
          process_rows[i].Fail(Concat(p.process_slowdown_by_size.back().size(), " factors, shared_slowdown has ",
                                      p.shared_slowdown.size()));
        }
      }
    }
  } else if (root.Has("process_slowdown_by_size")) {
    root["process_slowdown_by_size"].Fail("given without shared_slowdown_sizes");
  }
  if (root.Has("shared_slowdown_turns")) {
    const YamlCursor turns = root["shared_slowdown_turns"];
    p.shared_slowdown_turns = int(turns.Int());
    if (p.shared_slowdown_turns < 1) turns.Fail(Concat("expected a count >= 1, found ", p.shared_slowdown_turns));
    p.shared_slowdown_band = ReadBand(root["shared_slowdown_band"]);
  }
}

}  // namespace

std::string ProfileToYaml(const Profile& p) {
  YAML::Emitter out;
  out.SetDoublePrecision(6);
  out << YAML::BeginMap;
  out << YAML::Key << "format" << YAML::Value << kProfileFormat;
  out << YAML::Key << "fingerprint" << YAML::Value << p.fingerprint;
  out << YAML::Key << "inputs" << YAML::Value << YAML::BeginSeq;
  for (const auto& spec : p.inputs) {
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value << spec.name << YAML::Key << "spec"
        << YAML::Value << FormatTensorSpec(spec) << YAML::Key << "batch_dim" << YAML::Value << spec.batch_dim;
    if (spec.has_range) {
      out << YAML::Key << "range" << YAML::Value;
      EmitFlowSeq(out, std::vector<int64_t>{spec.low, spec.high});
    }
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "batch" << YAML::Value << p.batch;
  out << YAML::Key << "mode" << YAML::Value << (p.training ? "train" : "infer");
  out << YAML::Key << "source" << YAML::Value << p.source;
  out << YAML::Key << "device" << YAML::Value << p.device;
  out << YAML::Key << "threads" << YAML::Value << p.threads;
  out << YAML::Key << "warmup" << YAML::Value << p.warmup;
  out << YAML::Key << "repeats" << YAML::Value << p.repeats;
  out << YAML::Key << "microbatch_sizes" << YAML::Value;
  EmitFlowSeq(out, p.microbatch_sizes);
  out << YAML::Key << "whole_forward_ms" << YAML::Value << p.whole_forward_ms;
  out << YAML::Key << "whole_backward_ms" << YAML::Value << p.whole_backward_ms;
  out << YAML::Key << "coverage" << YAML::Value << p.coverage;
  out << YAML::Key << "backward_coverage" << YAML::Value << p.backward_coverage;
  if (!p.shared_slowdown.empty()) {
    out << YAML::Key << "shared_slowdown" << YAML::Value;
    EmitFlowSeq(out, p.shared_slowdown);
    out << YAML::Key << "shared_slowdown_microbatch" << YAML::Value << p.shared_slowdown_microbatch;
    if (!p.shared_slowdown_sizes.empty()) {
      out << YAML::Key << "shared_slowdown_sizes" << YAML::Value;
      EmitFlowSeq(out, p.shared_slowdown_sizes);
      out << YAML::Key << "shared_slowdown_by_size" << YAML::Value << YAML::BeginSeq;
      for (const auto& row : p.shared_slowdown_by_size) EmitFlowSeq(out, row);
      out << YAML::EndSeq;
      if (!p.process_slowdown_by_size.empty()) {
        out << YAML::Key << "process_slowdown_by_size" << YAML::Value << YAML::BeginSeq;
        for (const auto& row : p.process_slowdown_by_size) EmitFlowSeq(out, row);
        out << YAML::EndSeq;
      }
    }
    if (p.shared_slowdown_turns > 0) {
      out << YAML::Key << "shared_slowdown_band" << YAML::Value;
      EmitFlowSeq(out, std::vector<double>{p.shared_slowdown_band.low, p.shared_slowdown_band.high});
      out << YAML::Key << "shared_slowdown_turns" << YAML::Value << p.shared_slowdown_turns;
    }
  }
  if (!p.worker_speed.empty()) {
    out << YAML::Key << "worker_speed" << YAML::Value;
    EmitFlowSeq(out, p.worker_speed);
  }
  if (p.handoff_ms > 0) out << YAML::Key << "handoff_ms" << YAML::Value << p.handoff_ms;
  for (const auto& [key, link] : {std::pair{"process_link", &p.process_link}, {"allreduce_link", &p.allreduce_link}}) {
    if (!link->Measured()) continue;
    out << YAML::Key << key << YAML::Value << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "latency_ms" << YAML::Value << link->latency_ms;
    out << YAML::Key << "bytes_per_s" << YAML::Value << link->bytes_per_s;
    out << YAML::EndMap;
  }
  if (p.allreduce_after_step.Measured()) {
    const Profile::AllReduceAfterStep& a = p.allreduce_after_step;
    out << YAML::Key << "allreduce_after_step" << YAML::Value << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "bytes" << YAML::Value << a.bytes;
    out << YAML::Key << "ms" << YAML::Value << a.ms;
    out << YAML::Key << "microbatch" << YAML::Value << a.microbatch;
    if (a.gap_ms > 0 && a.round_ms > 0) {
      out << YAML::Key << "gap_ms" << YAML::Value << a.gap_ms;
      out << YAML::Key << "round_ms" << YAML::Value << a.round_ms;
    }
    out << YAML::EndMap;
  }
  if (!p.step_overhead_ms.empty()) {
    out << YAML::Key << "step_overhead_ms" << YAML::Value;
    EmitFlowSeq(out, p.step_overhead_ms);
  }
  if (!p.pass_band.Empty()) {
    out << YAML::Key << "pass_band" << YAML::Value;
    EmitFlowSeq(out, std::vector<double>{p.pass_band.low, p.pass_band.high});
  }
  if (p.reference_ms > 0) {
    out << YAML::Key << "reference_ms" << YAML::Value << p.reference_ms;
    out << YAML::Key << "reference_band" << YAML::Value;
    EmitFlowSeq(out, std::vector<double>{p.reference_band.low, p.reference_band.high});
  }
  if (p.pass_scale > 0) out << YAML::Key << "pass_scale" << YAML::Value << p.pass_scale;
  if (!p.whole_scale.empty()) {
    out << YAML::Key << "whole_scale" << YAML::Value << YAML::BeginSeq;
    for (const auto& pair : p.whole_scale) EmitFlowSeq(out, pair);
    out << YAML::EndSeq;
  }
  if (!p.paced_sizes.empty()) {
    out << YAML::Key << "paced_sizes" << YAML::Value << YAML::BeginSeq;
    for (const Profile::PacedSize& paced : p.paced_sizes) {
      out << YAML::Flow << YAML::BeginMap;
      out << YAML::Key << "size" << YAML::Value << paced.size;
      out << YAML::Key << "anchor" << YAML::Value << paced.anchor;
      out << YAML::Key << "pace" << YAML::Value << paced.pace;
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
  if (!p.sizes_left_out.empty()) {
    out << YAML::Key << "sizes_left_out" << YAML::Value << YAML::BeginSeq;
    for (const Profile::LeftOutSize& left : p.sizes_left_out) {
      out << YAML::Flow << YAML::BeginMap;
      out << YAML::Key << "size" << YAML::Value << left.size;
      out << YAML::Key << "why" << YAML::Value << YAML::DoubleQuoted << left.why;
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
  if (p.accumulate_ms_per_mib > 0) {
    out << YAML::Key << "accumulate_ms_per_mib" << YAML::Value << p.accumulate_ms_per_mib;
  }
  if (!p.optimizer_ms_per_mib.empty()) {
    out << YAML::Key << "optimizer_ms_per_mib" << YAML::Value << YAML::Flow << YAML::BeginMap;
    for (const auto& [name, ms] : p.optimizer_ms_per_mib) out << YAML::Key << name << YAML::Value << ms;
    out << YAML::EndMap;
  }
  if (!p.optimizer_slowdown.empty()) {
    out << YAML::Key << "optimizer_slowdown" << YAML::Value;
    EmitFlowSeq(out, p.optimizer_slowdown);
  }
  if (!p.node_overhead.empty()) {
    out << YAML::Key << "node_overhead_ms" << YAML::Value;
    EmitFlowSeq(out, p.node_overhead);
  }
  out << YAML::Key << "nodes" << YAML::Value << YAML::BeginSeq;
  for (const auto& n : p.nodes) {
    out << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "id" << YAML::Value << n.id;
    out << YAML::Key << "kind" << YAML::Value << n.kind;
    out << YAML::Key << "layer" << YAML::Value << n.layer;
    out << YAML::Key << "forward_ms" << YAML::Value;
    EmitFlowSeq(out, n.forward_ms);
    out << YAML::Key << "backward_ms" << YAML::Value;
    EmitFlowSeq(out, n.backward_ms);
    if (!n.input_backward_ms.empty()) {
      out << YAML::Key << "input_backward_ms" << YAML::Value;
      EmitFlowSeq(out, n.input_backward_ms);
      out << YAML::Key << "weight_backward_ms" << YAML::Value;
      EmitFlowSeq(out, n.weight_backward_ms);
    }
    out << YAML::Key << "spread" << YAML::Value;
    EmitFlowSeq(out, n.spread);
    out << YAML::Key << "flops" << YAML::Value;
    EmitFlowSeq(out, n.flops);
    out << YAML::Key << "bytes_moved" << YAML::Value;
    EmitFlowSeq(out, n.bytes_moved);
    out << YAML::Key << "output_bytes" << YAML::Value;
    EmitFlowSeq(out, std::vector<int64_t>{n.output_bytes_per_sample, n.output_bytes_fixed});
    out << YAML::Key << "param_bytes" << YAML::Value << n.param_bytes;
    const std::pair<const char*, const std::optional<ValueBytes>*> measured[] = {
        {"kept_bytes", &n.kept}, {"weight_kept_bytes", &n.weight_kept}};
    for (const auto& [key, bytes] : measured) {
      if (!*bytes) continue;
      out << YAML::Key << key << YAML::Value;
      EmitFlowSeq(out, std::vector<int64_t>{(*bytes)->per_sample, (*bytes)->fixed});
    }
    for (const auto& [key, member] : kPerSizeBytes) {
      if ((n.*member).empty()) continue;
      out << YAML::Key << key << YAML::Value;
      EmitFlowSeq(out, n.*member);
    }
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "values" << YAML::Value << YAML::BeginSeq;
  for (const auto& v : p.values) EmitFlowSeq(out, std::vector<int64_t>{v.per_sample, v.fixed});
  out << YAML::EndSeq;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

Profile ProfileFromYaml(const std::string& yaml, const std::string& source) {
  const YamlCursor root(LoadYamlDocument(yaml, source), source);
  // The format first: another file's keys are not worth listing.
  const std::string format = root["format"].String();
  if (format != kProfileFormat) root["format"].Fail(Concat("expected ", kProfileFormat, ", found '", format, "'"));
  root.ExpectMap({"format", "fingerprint", "inputs", "batch", "mode", "source", "device", "threads", "warmup",
                  "repeats", "microbatch_sizes", "whole_forward_ms", "whole_backward_ms", "coverage",
                  "backward_coverage", "nodes", "values"},
                 {"shared_slowdown", "shared_slowdown_microbatch", "shared_slowdown_sizes", "shared_slowdown_by_size",
                  "process_slowdown_by_size", "shared_slowdown_band", "shared_slowdown_turns", "worker_speed",
                  "handoff_ms", "process_link", "allreduce_link", "allreduce_after_step", "step_overhead_ms",
                  "pass_band", "reference_ms", "reference_band", "pass_scale", "whole_scale", "paced_sizes",
                  "sizes_left_out",
                  "engine_walk_us",  // as autograd_nodes, ignored
                  "accumulate_ms_per_mib", "optimizer_ms_per_mib", "optimizer_slowdown", "node_overhead_ms"});
  Profile p;
  p.fingerprint = root["fingerprint"].String();
  const YamlCursor inputs = root["inputs"];
  for (int i = 0, n = inputs.ExpectList(); i < n; ++i) p.inputs.push_back(ReadInput(inputs[i]));
  p.batch = root["batch"].Int();
  const std::string mode = root["mode"].String();
  if (mode != "train" && mode != "infer") root["mode"].Fail("expected train or infer, found '" + mode + "'");
  p.training = mode == "train";
  p.source = root["source"].String();
  p.device = root["device"].String();
  p.threads = int(root["threads"].Int());
  p.warmup = int(root["warmup"].Int());
  p.repeats = int(root["repeats"].Int());
  p.microbatch_sizes = root["microbatch_sizes"].IntList();
  if (p.microbatch_sizes.empty()) root["microbatch_sizes"].Fail("expected at least one size, found none");
  p.whole_forward_ms = root["whole_forward_ms"].Number();
  p.whole_backward_ms = root["whole_backward_ms"].Number();
  p.coverage = root["coverage"].Number();
  p.backward_coverage = root["backward_coverage"].Number();
  if (root.Has("shared_slowdown")) {
    ReadSharedSlowdown(root, p);
  } else if (root.Has("shared_slowdown_turns")) {
    root["shared_slowdown_turns"].Fail("given without shared_slowdown");
  } else if (root.Has("process_slowdown_by_size")) {
    root["process_slowdown_by_size"].Fail("given without shared_slowdown");
  }
  if (root.Has("worker_speed")) {
    const YamlCursor speeds = root["worker_speed"];
    for (int i = 0, n = speeds.ExpectList(); i < n; ++i) {
      p.worker_speed.push_back(speeds[i].NumberIn(0, YamlCursor::kNoLimit, "a time multiplier", true));
    }
    if (p.worker_speed.empty() || p.worker_speed[0] != 1) {
      speeds.Fail("expected worker 0 at 1 and one entry per worker");
    }
  }
  if (root.Has("handoff_ms")) p.handoff_ms = root["handoff_ms"].NumberIn(0, YamlCursor::kNoLimit, "a time");
  for (const auto& [key, link] : {std::pair{"process_link", &p.process_link}, {"allreduce_link", &p.allreduce_link}}) {
    if (!root.Has(key)) continue;
    const YamlCursor at = root[key];
    at.ExpectMap({"latency_ms", "bytes_per_s"}, {});
    link->latency_ms = at["latency_ms"].NumberIn(0, YamlCursor::kNoLimit, "a time");
    link->bytes_per_s = at["bytes_per_s"].NumberIn(0, YamlCursor::kNoLimit, "bytes per second");
  }
  if (root.Has("allreduce_after_step")) {
    const YamlCursor at = root["allreduce_after_step"];
    at.ExpectMap({"bytes", "ms", "microbatch"}, {"gap_ms", "round_ms"});
    Profile::AllReduceAfterStep& a = p.allreduce_after_step;
    a.bytes = at["bytes"].Int();
    if (a.bytes < 1) at["bytes"].Fail(Concat("expected a byte count >= 1, found ", a.bytes));
    a.ms = at["ms"].NumberIn(0, YamlCursor::kNoLimit, "a time", true);
    a.microbatch = at["microbatch"].IntIn(1, p.batch);
    if (at.Has("gap_ms") != at.Has("round_ms")) {
      at[at.Has("gap_ms") ? "gap_ms" : "round_ms"].Fail("expected gap_ms and round_ms together");
    }
    if (at.Has("gap_ms")) {
      a.gap_ms = at["gap_ms"].NumberIn(0, YamlCursor::kNoLimit, "a time");
      a.round_ms = at["round_ms"].NumberIn(0, YamlCursor::kNoLimit, "a time", true);
    }
  }
  if (root.Has("step_overhead_ms")) {
    const YamlCursor times = root["step_overhead_ms"];
    for (int i = 0, n = times.ExpectList(); i < n; ++i) {
      p.step_overhead_ms.push_back(times[i].NumberIn(0, YamlCursor::kNoLimit, "a time"));
    }
  }
  if (root.Has("pass_band")) p.pass_band = ReadBand(root["pass_band"]);
  if (root.Has("reference_ms")) {
    p.reference_ms = root["reference_ms"].NumberIn(0, YamlCursor::kNoLimit, "a time", true);
    p.reference_band = ReadBand(root["reference_band"]);
  }
  if (root.Has("pass_scale")) p.pass_scale = root["pass_scale"].NumberIn(0, YamlCursor::kNoLimit, "a factor", true);
  if (root.Has("whole_scale")) {  // one [forward, backward] per size
    const YamlCursor rows = root["whole_scale"];
    const int n = rows.ExpectList(int(p.microbatch_sizes.size()));
    for (int i = 0; i < n; ++i) {
      rows[i].ExpectList(2);
      p.whole_scale.push_back({rows[i][0].NumberIn(0, YamlCursor::kNoLimit, "a factor", true),
                               rows[i][1].NumberIn(0, YamlCursor::kNoLimit, "a factor", true)});
    }
  }
  if (root.Has("paced_sizes")) {
    const YamlCursor list = root["paced_sizes"];
    const auto measured = [&](const YamlCursor& at) {
      const int64_t size = at.Int();
      const auto& sizes = p.microbatch_sizes;
      if (std::find(sizes.begin(), sizes.end(), size) == sizes.end()) {
        at.Fail(Concat("expected one of microbatch_sizes, found ", size));
      }
      return size;
    };
    for (int i = 0, n = list.ExpectList(); i < n; ++i) {
      list[i].ExpectMap({"size", "anchor", "pace"}, {});
      p.paced_sizes.push_back({measured(list[i]["size"]), measured(list[i]["anchor"]),
                               list[i]["pace"].NumberIn(0, YamlCursor::kNoLimit, "a factor", true)});
    }
  }
  if (root.Has("sizes_left_out")) {
    const YamlCursor list = root["sizes_left_out"];
    for (int i = 0, n = list.ExpectList(); i < n; ++i) {
      list[i].ExpectMap({"size", "why"}, {});
      const int64_t size = list[i]["size"].IntIn(1, p.batch);
      const auto& sizes = p.microbatch_sizes;
      if (std::find(sizes.begin(), sizes.end(), size) != sizes.end()) {
        list[i]["size"].Fail(Concat("expected a size not in microbatch_sizes, found ", size));
      }
      p.sizes_left_out.push_back({size, list[i]["why"].String()});
    }
  }
  if (root.Has("accumulate_ms_per_mib")) {
    p.accumulate_ms_per_mib = root["accumulate_ms_per_mib"].NumberIn(0, YamlCursor::kNoLimit, "a time", true);
  }
  if (root.Has("optimizer_ms_per_mib")) {
    const YamlCursor rates = root["optimizer_ms_per_mib"];
    rates.ExpectMap({}, {"sgd", "momentum", "adam", "adamw"});
    for (const char* name : {"sgd", "momentum", "adam", "adamw"}) {
      if (rates.Has(name)) p.optimizer_ms_per_mib[name] = rates[name].NumberIn(0, YamlCursor::kNoLimit, "a time");
    }
  }
  if (root.Has("optimizer_slowdown")) {
    const YamlCursor factors = root["optimizer_slowdown"];
    for (int i = 0, n = factors.ExpectList(); i < n; ++i) {
      p.optimizer_slowdown.push_back(factors[i].NumberIn(1, YamlCursor::kNoLimit, "a factor"));
    }
  }
  if (root.Has("node_overhead_ms")) {
    const YamlCursor parts = root["node_overhead_ms"];
    const int n = parts.ExpectList();
    if (n != 3) parts.Fail(Concat("expected 3 entries (forward per call, per leaf, backward per call), found ", n));
    for (int i = 0; i < 3; ++i) p.node_overhead.push_back(parts[i].NumberIn(0, YamlCursor::kNoLimit, "a time"));
  }
  const YamlCursor nodes = root["nodes"];
  for (int i = 0, n = nodes.ExpectList(); i < n; ++i) {
    p.nodes.push_back(ReadNode(nodes[i], size_t(i), p.microbatch_sizes.size(), p.training));
  }
  const YamlCursor values = root["values"];
  for (int i = 0, n = values.ExpectList(); i < n; ++i) p.values.push_back(ReadBytes(values[i]));
  return p;
}

void CheckProfileMatches(const Profile& profile, const std::string& fingerprint,
                         const std::vector<TensorSpec>& inputs, bool training, const std::string& source,
                         int64_t batch_flag) {
  // The mode first: a model with dropout or BatchNorm canonicalises to
  // another graph in each mode, so its training profile read for an
  // inference plan differs in its fingerprint too, which says less.
  if (profile.training != training)
    throw InputError(Concat(source, ": profile is for ", profile.training ? "training" : "inference",
                            ", the plan is for ", training ? "training" : "inference"));
  if (profile.fingerprint != fingerprint)
    throw InputError(Concat(source, ": profile of a different graph (fingerprint ", profile.fingerprint,
                            ", this model's is ", fingerprint, ")"));
  const auto format = [](const std::vector<TensorSpec>& specs) {
    std::string text;
    for (const auto& s : specs) text += (text.empty() ? "" : " ") + FormatTensorSpec(s);
    return text;
  };
  const std::string theirs = format(profile.inputs), ours = format(inputs);
  if (theirs == ours) return;
  if (batch_flag > 0 && format(WithBatch(profile.inputs, batch_flag)) == ours) {
    throw InputError(Concat("--batch ", batch_flag, ": ", source, " was profiled at batch ", profile.batch,
                            " (inputs ", theirs, "); leave --batch out, or profile again without --profile-in"));
  }
  throw InputError(Concat(source, ": profile was taken on inputs ", theirs, ", not ", ours));
}

void CheckProfileDevice(const Profile& profile, const std::string& device_profile_name,
                        const std::string& local_device, const std::string& source) {
  const bool measured = profile.source == "measured";
  if (device_profile_name.empty()) {
    if (!measured) {
      // The flag to give, where the name is a bundled profile's.
      const std::string bundled = BundledProfileName(profile.device);
      const std::string flag = bundled.empty() ? "the --device-profile it was made for" : "--device-profile " + bundled;
      throw InputError(Concat(source, ": profile is ", profile.source, " on ", profile.device, "; plan from it with ",
                              flag, " (without one the plan is for this machine's ", local_device, ")"));
    }
    const auto type = [](const std::string& device) { return device.substr(0, device.find(':')); };
    if (type(profile.device) != type(local_device)) {
      throw InputError(Concat(source, ": profile was measured on ", profile.device, ", the plan is for ",
                              local_device, " (--device ", local_device, ")"));
    }
    return;
  }
  if (measured) {
    throw InputError(Concat(source, ": profile was measured on ", profile.device, ", the plan is for ",
                            device_profile_name,
                            " (--device-profile): leave --device-profile out, or profile with it"));
  }
  if (profile.device != device_profile_name) {
    throw InputError(Concat(source, ": profile is ", profile.source, " on ", profile.device, ", the plan is for ",
                            device_profile_name, " (--device-profile)"));
  }
}

}  // namespace mp
