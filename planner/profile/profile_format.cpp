// Per-layer aggregation of a Profile for the terminal and for JSON. Layers
// are top-level modules (conv1, layer3, blocks.0 stays "blocks"), in order
// of their first node; forward's own ops are "(root)".
#include "planner/profile/profile_format.h"

#include <cstdio>
#include <map>
#include <sstream>
#include <utility>

namespace mp {
namespace {

struct LayerTotals {
  std::string name;
  int nodes = 0;
  std::vector<double> forward_ms, backward_ms, flops;
  int64_t param_bytes = 0;
  int64_t out_bytes_per_sample = 0;
};

std::string TopLayer(const std::string& path) {
  return path.empty() ? "(root)" : path.substr(0, path.find('.'));
}

std::vector<LayerTotals> Layers(const Profile& p) {
  std::vector<LayerTotals> layers;
  std::map<std::string, size_t> index;
  const size_t sizes = p.microbatch_sizes.size();
  for (const auto& node : p.nodes) {
    const std::string name = TopLayer(node.layer);
    auto it = index.find(name);
    if (it == index.end()) {
      it = index.emplace(name, layers.size()).first;
      LayerTotals totals;
      totals.name = name;
      totals.forward_ms.assign(sizes, 0);
      totals.backward_ms.assign(sizes, 0);
      totals.flops.assign(sizes, 0);
      layers.push_back(totals);
    }
    LayerTotals& layer = layers[it->second];
    ++layer.nodes;
    for (size_t i = 0; i < sizes; ++i) {
      layer.forward_ms[i] += node.forward_ms[i];
      if (!node.backward_ms.empty()) layer.backward_ms[i] += node.backward_ms[i];
      layer.flops[i] += node.flops[i];
    }
    layer.param_bytes += node.param_bytes;
    layer.out_bytes_per_sample += node.output_bytes_per_sample;
  }
  return layers;
}

std::vector<double> NodeSums(const Profile& p, bool backward) {
  std::vector<double> sums(p.microbatch_sizes.size(), 0);
  for (const auto& node : p.nodes) {
    const auto& times = backward ? node.backward_ms : node.forward_ms;
    for (size_t i = 0; i < times.size(); ++i) sums[i] += times[i];
  }
  return sums;
}

std::string Format(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

}  // namespace

std::string FormatProfile(const Profile& p, const std::string& calibration, double profiling_s) {
  std::ostringstream out;
  out << "profile: " << p.source << " on " << p.device;
  if (p.threads > 0) out << ", " << p.threads << " thread" << (p.threads == 1 ? "" : "s");
  out << ", " << (p.training ? "training" : "inference") << ", batch " << p.batch << "\n";
  out << "micro-batch sizes:";
  for (int64_t m : p.microbatch_sizes) out << " " << m;
  out << "\n";
  if (p.repeats > 0) out << "timing: " << p.warmup << " warm-up, median of " << p.repeats << "\n";
  if (!calibration.empty()) out << "calibration: " << calibration << "\n";
  const auto forward = NodeSums(p, false);
  const auto backward = NodeSums(p, true);
  const size_t last = p.microbatch_sizes.size() - 1;
  out << "sum of nodes at " << p.microbatch_sizes[last] << ": forward " << Format("%.2f", forward[last]) << " ms";
  if (p.training) out << ", backward " << Format("%.2f", backward[last]) << " ms";
  out << "\n";
  if (p.whole_forward_ms > 0) {
    out << "whole graph: forward " << Format("%.2f", p.whole_forward_ms) << " ms";
    if (p.training) out << ", backward " << Format("%.2f", p.whole_backward_ms) << " ms";
    out << "\ncoverage: forward " << Format("%.3f", p.coverage);
    if (p.training) out << ", backward " << Format("%.3f", p.backward_coverage);
    out << " (sum of per-node times / whole-graph time)\n";
  }
  if (p.shared_slowdown.size() > 1) {
    // One line per measured size (older profiles: the one size).
    std::vector<int64_t> sizes = p.shared_slowdown_sizes;
    if (sizes.empty()) sizes.push_back(p.shared_slowdown_microbatch);
    for (int64_t m : sizes) {
      const std::vector<double> factors = SharedSlowdownAt(p, m);
      out << "CPU workers at once (micro-batch " << m << "):";
      for (size_t k = 1; k < factors.size(); ++k)
        out << (k > 1 ? "," : "") << " " << k + 1 << " run " << Format("%.2f", factors[k]) << "x slower";
      if (!p.process_slowdown_by_size.empty()) {
        const std::vector<double> apart = SharedSlowdownAt(p, m, true);
        out << "; as processes";
        for (size_t k = 1; k < apart.size(); ++k) out << (k > 1 ? "," : "") << " " << Format("%.2f", apart[k]) << "x";
      }
      out << "\n";
    }
  }
  if (p.worker_speed.size() > 1) {
    out << "CPU workers' cores (pinned), time against worker 0's:";
    for (size_t w = 1; w < p.worker_speed.size(); ++w)
      out << (w > 1 ? "," : "") << " worker " << w << " " << Format("%.2f", p.worker_speed[w]) << "x";
    out << "\n";
  }
  if (p.handoff_ms > 0) out << "hand-off between CPU workers: " << Format("%.3f", p.handoff_ms) << " ms per message\n";
  for (const auto& [what, link] : {std::pair{"a message between processes", &p.process_link},
                                   {"an all-reduce hop between processes", &p.allreduce_link}}) {
    if (!link->Measured()) continue;
    out << what << ": " << Format("%.3f", link->latency_ms) << " ms + "
        << (link->bytes_per_s > 0 ? Format("%.2f", link->bytes_per_s / 1e9) + " GB/s" : "nothing per byte") << "\n";
  }
  if (p.allreduce_after_step.Measured()) {
    const Profile::AllReduceAfterStep& a = p.allreduce_after_step;
    out << "the model's gradients summed after a step: " << Format("%.2f", a.ms) << " ms for "
        << Format("%.2f", double(a.bytes) / (1 << 20)) << " MiB at micro-batch " << a.microbatch << ", "
        << Format("%.2f", AllReduceAfterStepFactor(p)) << "x what the hop's line charges (the planner charges this)\n";
    if (ReplicaWaitShare(p, 2) > 0) {
      out << "a replica's wait for the other before the sum: their steps ended " << Format("%.2f", a.gap_ms)
          << " ms apart in rounds of " << Format("%.2f", a.round_ms) << " ms; two replicas' steps charged "
          << Format("%.1f%%", 100 * ReplicaWaitShare(p, 2)) << " more\n";
    }
  }
  if (!p.step_overhead_ms.empty()) {
    out << "mpexec's fixed cost per step:";
    for (size_t k = 0; k < p.step_overhead_ms.size(); ++k) {
      out << (k ? "," : "") << " " << Format("%.3f", p.step_overhead_ms[k]) << " ms with " << k + 1 << " worker"
          << (k ? "s" : "");
    }
    out << "\n";
  }
  if (p.reference_ms > 0) {
    const Band band = PredictionBand(p, std::max<int>(1, p.shared_slowdown.size()));
    out << "noise: passes " << Format("%+.1f", 100 * (p.pass_band.low - 1)) << "% to "
        << Format("%+.1f", 100 * (p.pass_band.high - 1)) << "%, drift reference " << Format("%.3f", p.reference_ms)
        << " ms (" << Format("%+.1f", 100 * (p.reference_band.low - 1)) << "% to "
        << Format("%+.1f", 100 * (p.reference_band.high - 1)) << "%): predictions carry a band of "
        << Format("%+.1f", 100 * (band.low - 1)) << "% to " << Format("%+.1f", 100 * (band.high - 1)) << "%\n";
  }
  if (p.pass_scale > 0) {
    out << "node times scaled by " << Format("%.3f", p.pass_scale)
        << ": the passes' median total over the sum of the nodes' medians\n";
  }
  if (p.whole_scale.size() == p.microbatch_sizes.size()) {
    out << "then at each size to the whole graph's warm run (forward, backward):";
    for (size_t i = 0; i < p.whole_scale.size(); ++i) {
      out << (i ? ";" : "") << " " << p.microbatch_sizes[i] << ": " << Format("%.3f", p.whole_scale[i].at(0)) << ", "
          << Format("%.3f", p.whole_scale[i].at(1));
    }
    out << "\n";
  }
  if (p.accumulate_ms_per_mib > 0) {
    out << "a micro-batch's gradients join .grad at " << Format("%.3f", p.accumulate_ms_per_mib)
        << " ms a MiB of parameters: charged to the backward of every micro-batch after a step's first\n";
  }
  if (!p.optimizer_ms_per_mib.empty()) {
    out << "the optimizer's step:";
    for (const auto& [name, ms] : p.optimizer_ms_per_mib) {
      out << (name == p.optimizer_ms_per_mib.begin()->first ? " " : ", ") << name << " " << Format("%.3f", ms);
    }
    out << " ms a MiB of trained parameters: charged to each device after its last backward";
    for (size_t k = 1; k < p.optimizer_slowdown.size(); ++k) {
      out << (k == 1 ? "; " : ", ") << Format("%.2f", p.optimizer_slowdown[k]) << "x with " << k + 1 << " at once";
    }
    out << "\n";
  }
  if (p.node_overhead.size() == 3) {
    out << "timing a node alone added " << Format("%.2f", 1000 * p.node_overhead[0]) << " us a forward, "
        << Format("%.2f", 1000 * p.node_overhead[1]) << " us a fresh leaf, "
        << Format("%.2f", 1000 * p.node_overhead[2]) << " us an autograd call: taken off every node's times\n";
  }
  for (const Profile::LeftOutSize& left : p.sizes_left_out) {
    out << "micro-batch size " << left.size << " left out: the model fails there (" << left.why << ")\n";
  }
  if (profiling_s > 0) out << "profiling took " << Format("%.1f", profiling_s) << " s\n";
  out << "\n";
  char line[256];
  std::string header = "layer                nodes";
  for (int64_t m : p.microbatch_sizes) header += Format("   fwd@%-4.0f", double(m));
  header += p.training ? "   bwd@max" : "";
  out << header << "   GFLOP@max  param MiB  act KiB/sample\n";
  for (const auto& layer : Layers(p)) {
    std::snprintf(line, sizeof line, "%-20s %5d", layer.name.substr(0, 20).c_str(), layer.nodes);
    out << line;
    for (double ms : layer.forward_ms) out << Format(" %10.3f", ms);
    if (p.training) out << Format(" %10.3f", layer.backward_ms[last]);
    std::snprintf(line, sizeof line, " %11.3f %10.2f %15.1f\n", layer.flops[last] / 1e9,
                  double(layer.param_bytes) / (1 << 20), double(layer.out_bytes_per_sample) / 1024);
    out << line;
  }
  return out.str();
}

nlohmann::json ProfileSummaryJson(const Profile& p, const std::string& calibration, double profiling_s) {
  nlohmann::json j;
  j["source"] = p.source;
  j["device"] = p.device;
  j["mode"] = p.training ? "train" : "infer";
  j["threads"] = p.threads;
  j["batch"] = p.batch;
  j["microbatch_sizes"] = p.microbatch_sizes;
  j["sizes_left_out"] = nlohmann::json::array();
  for (const Profile::LeftOutSize& left : p.sizes_left_out) {
    j["sizes_left_out"].push_back({{"size", left.size}, {"why", left.why}});
  }
  j["warmup"] = p.warmup;
  j["repeats"] = p.repeats;
  j["coverage"] = p.coverage;
  j["backward_coverage"] = p.backward_coverage;
  j["whole_forward_ms"] = p.whole_forward_ms;
  j["whole_backward_ms"] = p.whole_backward_ms;
  j["pass_band"] = {p.pass_band.low, p.pass_band.high};
  j["reference_ms"] = p.reference_ms;
  j["reference_band"] = {p.reference_band.low, p.reference_band.high};
  j["pass_scale"] = p.pass_scale;
  j["whole_scale"] = p.whole_scale;
  j["accumulate_ms_per_mib"] = p.accumulate_ms_per_mib;
  j["node_overhead_ms"] = p.node_overhead;
  j["optimizer_ms_per_mib"] = p.optimizer_ms_per_mib;
  j["optimizer_slowdown"] = p.optimizer_slowdown;
  j["worker_speed"] = p.worker_speed;
  j["step_overhead_ms"] = p.step_overhead_ms;
  j["node_forward_ms"] = NodeSums(p, false);
  j["node_backward_ms"] = NodeSums(p, true);
  std::vector<double> flops(p.microbatch_sizes.size(), 0);
  for (const auto& node : p.nodes)
    for (size_t i = 0; i < flops.size(); ++i) flops[i] += node.flops[i];
  j["flops"] = flops;
  j["nodes"] = p.nodes.size();
  j["profiling_s"] = profiling_s;
  j["calibration"] = calibration;
  j["fingerprint"] = p.fingerprint;
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& layer : Layers(p)) {
    layers.push_back({{"name", layer.name},
                      {"nodes", layer.nodes},
                      {"forward_ms", layer.forward_ms},
                      {"backward_ms", layer.backward_ms},
                      {"flops", layer.flops},
                      {"param_bytes", layer.param_bytes},
                      {"activation_bytes_per_sample", layer.out_bytes_per_sample}});
  }
  j["layers"] = layers;
  return j;
}

}  // namespace mp
