// The profile file format (mpplan-profile/v1): a header with the key
// (fingerprint, inputs, mode, device, threads) and the timing setup, then
// one flow-style line per node and a list of [per_sample, fixed] byte pairs
// per value, so a diff of two profiles reads node by node.
#include "planner/profile/profile_file.h"

#include <yaml-cpp/yaml.h>

#include <cmath>

#include "common/error.h"
#include "planner/profile/yaml_document.h"

namespace mp {
namespace {

class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  YAML::Node Need(const YAML::Node& map, const std::string& key, const std::string& where) const {
    const YAML::Node node = map[key];
    if (!node) throw InputError(Concat(source_, ": ", where, key, ": missing"));
    return node;
  }

  template <typename T>
  T Get(const YAML::Node& map, const std::string& key, const std::string& where = "") const {
    const YAML::Node node = Need(map, key, where);
    try {
      return node.as<T>();
    } catch (const YAML::Exception&) {
      throw InputError(Concat(source_, ": ", where, key, ": unexpected value at line ", node.Mark().line + 1));
    }
  }

 private:
  std::string source_;
};

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
    }
    if (p.shared_slowdown_turns > 0) {
      out << YAML::Key << "shared_slowdown_band" << YAML::Value;
      EmitFlowSeq(out, std::vector<double>{p.shared_slowdown_band.low, p.shared_slowdown_band.high});
      out << YAML::Key << "shared_slowdown_turns" << YAML::Value << p.shared_slowdown_turns;
    }
  }
  if (p.handoff_ms > 0) out << YAML::Key << "handoff_ms" << YAML::Value << p.handoff_ms;
  if (!p.pass_band.Empty()) {
    out << YAML::Key << "pass_band" << YAML::Value;
    EmitFlowSeq(out, std::vector<double>{p.pass_band.low, p.pass_band.high});
  }
  if (p.reference_ms > 0) {
    out << YAML::Key << "reference_ms" << YAML::Value << p.reference_ms;
    out << YAML::Key << "reference_band" << YAML::Value;
    EmitFlowSeq(out, std::vector<double>{p.reference_band.low, p.reference_band.high});
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
    out << YAML::Key << "spread" << YAML::Value;
    EmitFlowSeq(out, n.spread);
    out << YAML::Key << "flops" << YAML::Value;
    EmitFlowSeq(out, n.flops);
    out << YAML::Key << "bytes_moved" << YAML::Value;
    EmitFlowSeq(out, n.bytes_moved);
    out << YAML::Key << "output_bytes" << YAML::Value;
    EmitFlowSeq(out, std::vector<int64_t>{n.output_bytes_per_sample, n.output_bytes_fixed});
    out << YAML::Key << "param_bytes" << YAML::Value << n.param_bytes;
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
  const YAML::Node root = LoadYamlDocument(yaml, source);
  if (!root.IsMap()) throw InputError(Concat(source, ": not a profile (expected a YAML mapping)"));
  const Reader r(source);
  const auto format = r.Get<std::string>(root, "format");
  if (format != kProfileFormat)
    throw InputError(Concat(source, ": format: expected ", kProfileFormat, ", got '", format, "'"));
  Profile p;
  p.fingerprint = r.Get<std::string>(root, "fingerprint");
  for (const auto& item : r.Need(root, "inputs", "")) {
    TensorSpec spec = ParseTensorSpec(r.Get<std::string>(item, "spec", "inputs[]."));
    spec.name = r.Get<std::string>(item, "name", "inputs[].");
    spec.batch_dim = r.Get<int>(item, "batch_dim", "inputs[].");
    if (item["range"]) {
      const auto range = r.Get<std::vector<int64_t>>(item, "range", "inputs[].");
      if (range.size() != 2) throw InputError(Concat(source, ": inputs[].range: expected [low, high]"));
      spec.has_range = true;
      spec.low = range[0];
      spec.high = range[1];
    }
    p.inputs.push_back(spec);
  }
  p.batch = r.Get<int64_t>(root, "batch");
  const auto mode = r.Get<std::string>(root, "mode");
  if (mode != "train" && mode != "infer")
    throw InputError(Concat(source, ": mode: expected train or infer, got '", mode, "'"));
  p.training = mode == "train";
  p.source = r.Get<std::string>(root, "source");
  p.device = r.Get<std::string>(root, "device");
  p.threads = r.Get<int>(root, "threads");
  p.warmup = r.Get<int>(root, "warmup");
  p.repeats = r.Get<int>(root, "repeats");
  p.microbatch_sizes = r.Get<std::vector<int64_t>>(root, "microbatch_sizes");
  p.whole_forward_ms = r.Get<double>(root, "whole_forward_ms");
  p.whole_backward_ms = r.Get<double>(root, "whole_backward_ms");
  p.coverage = r.Get<double>(root, "coverage");
  p.backward_coverage = r.Get<double>(root, "backward_coverage");
  if (root["shared_slowdown"]) {
    p.shared_slowdown = r.Get<std::vector<double>>(root, "shared_slowdown");
    p.shared_slowdown_microbatch = r.Get<int64_t>(root, "shared_slowdown_microbatch");
    for (double f : p.shared_slowdown)
      if (!(f >= 1) || !std::isfinite(f))
        throw InputError(Concat(source, ": shared_slowdown: expected factors >= 1, got ", f));
    if (root["shared_slowdown_sizes"]) {
      p.shared_slowdown_sizes = r.Get<std::vector<int64_t>>(root, "shared_slowdown_sizes");
      p.shared_slowdown_by_size = r.Get<std::vector<std::vector<double>>>(root, "shared_slowdown_by_size");
      const auto& sizes = p.shared_slowdown_sizes;
      if (p.shared_slowdown_by_size.size() != sizes.size())
        throw InputError(Concat(source, ": shared_slowdown_by_size: ", p.shared_slowdown_by_size.size(), " rows for ",
                                sizes.size(), " shared_slowdown_sizes"));
      for (size_t i = 0; i < sizes.size(); ++i) {
        if (sizes[i] < 1 || (i > 0 && sizes[i] <= sizes[i - 1]))
          throw InputError(Concat(source, ": shared_slowdown_sizes: expected ascending sizes >= 1"));
        if (p.shared_slowdown_by_size[i].size() != p.shared_slowdown.size())
          throw InputError(Concat(source, ": shared_slowdown_by_size[", i, "]: ", p.shared_slowdown_by_size[i].size(),
                                  " factors, shared_slowdown has ", p.shared_slowdown.size()));
        for (double f : p.shared_slowdown_by_size[i])
          if (!(f >= 1) || !std::isfinite(f))
            throw InputError(Concat(source, ": shared_slowdown_by_size[", i, "]: expected factors >= 1, got ", f));
      }
    }
  }
  if (root["handoff_ms"]) {
    p.handoff_ms = r.Get<double>(root, "handoff_ms");
    if (!(p.handoff_ms >= 0) || !std::isfinite(p.handoff_ms))
      throw InputError(Concat(source, ": handoff_ms: expected a time >= 0, got ", p.handoff_ms));
  }
  const auto band = [&](const char* key) {
    const auto pair = r.Get<std::vector<double>>(root, key);
    if (pair.size() != 2) throw InputError(Concat(source, ": ", key, ": expected [low, high]"));
    const Band b{pair[0], pair[1]};
    CheckBand(b, Concat(source, ": ", key));
    return b;
  };
  if (root["pass_band"]) p.pass_band = band("pass_band");
  if (root["shared_slowdown_turns"]) {
    if (p.shared_slowdown.empty())
      throw InputError(Concat(source, ": shared_slowdown_turns: given without shared_slowdown"));
    p.shared_slowdown_turns = r.Get<int>(root, "shared_slowdown_turns");
    if (p.shared_slowdown_turns < 1)
      throw InputError(Concat(source, ": shared_slowdown_turns: expected a count >= 1, got ", p.shared_slowdown_turns));
    p.shared_slowdown_band = band("shared_slowdown_band");
  }
  if (root["reference_ms"]) {
    p.reference_ms = r.Get<double>(root, "reference_ms");
    if (!(p.reference_ms > 0) || !std::isfinite(p.reference_ms))
      throw InputError(Concat(source, ": reference_ms: expected a time > 0, got ", p.reference_ms));
    p.reference_band = band("reference_band");
  }
  const size_t sizes = p.microbatch_sizes.size();
  if (sizes == 0) throw InputError(Concat(source, ": microbatch_sizes: empty"));
  for (const auto& item : r.Need(root, "nodes", "")) {
    NodeCost n;
    const std::string where = Concat("nodes[", p.nodes.size(), "].");
    n.id = r.Get<int>(item, "id", where);
    if (n.id != static_cast<int>(p.nodes.size()))
      throw InputError(Concat(source, ": ", where, "id: expected ", p.nodes.size(), ", got ", n.id));
    n.kind = r.Get<std::string>(item, "kind", where);
    n.layer = r.Get<std::string>(item, "layer", where);
    n.forward_ms = r.Get<std::vector<double>>(item, "forward_ms", where);
    n.backward_ms = r.Get<std::vector<double>>(item, "backward_ms", where);
    n.spread = r.Get<std::vector<double>>(item, "spread", where);
    n.flops = r.Get<std::vector<double>>(item, "flops", where);
    n.bytes_moved = r.Get<std::vector<double>>(item, "bytes_moved", where);
    const std::pair<const char*, const std::vector<double>*> lists[] = {
        {"forward_ms", &n.forward_ms}, {"backward_ms", &n.backward_ms}, {"spread", &n.spread},
        {"flops", &n.flops}, {"bytes_moved", &n.bytes_moved}};
    for (const auto& [key, list] : lists) {
      const bool optional = list == &n.backward_ms && !p.training;
      if (list->size() != sizes && !(optional && list->empty()))
        throw InputError(Concat(source, ": ", where, key, ": ", list->size(), " entries for ", sizes,
                                " micro-batch sizes"));
    }
    const auto out = r.Get<std::vector<int64_t>>(item, "output_bytes", where);
    if (out.size() != 2) throw InputError(Concat(source, ": ", where, "output_bytes: expected [per_sample, fixed]"));
    n.output_bytes_per_sample = out[0];
    n.output_bytes_fixed = out[1];
    n.param_bytes = r.Get<int64_t>(item, "param_bytes", where);
    p.nodes.push_back(n);
  }
  for (const auto& item : r.Need(root, "values", "")) {
    const auto pair = item.as<std::vector<int64_t>>();
    if (pair.size() != 2) throw InputError(Concat(source, ": values[", p.values.size(), "]: expected [per_sample, fixed]"));
    p.values.push_back({pair[0], pair[1]});
  }
  return p;
}

void CheckProfileMatches(const Profile& profile, const std::string& fingerprint,
                         const std::vector<TensorSpec>& inputs, bool training, const std::string& source) {
  if (profile.fingerprint != fingerprint)
    throw InputError(Concat(source, ": profile of a different graph (fingerprint ", profile.fingerprint,
                            ", this model's is ", fingerprint, ")"));
  if (profile.training != training)
    throw InputError(Concat(source, ": profile is for ", profile.training ? "training" : "inference",
                            ", the plan is for ", training ? "training" : "inference"));
  std::string theirs, ours;
  for (const auto& s : profile.inputs) theirs += (theirs.empty() ? "" : " ") + FormatTensorSpec(s);
  for (const auto& s : inputs) ours += (ours.empty() ? "" : " ") + FormatTensorSpec(s);
  if (theirs != ours)
    throw InputError(Concat(source, ": profile was taken on inputs ", theirs, ", not ", ours));
}

}  // namespace mp
