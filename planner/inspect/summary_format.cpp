// Text and JSON forms of a GraphSummary. The text is for people (aligned
// tables, human units); the JSON is for scripts and tests (exact numbers).
#include <cstdio>
#include <sstream>

#include "planner/inspect/inspect.h"

namespace mp {
namespace {

std::string HumanBytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char out[32];
  std::snprintf(out, sizeof out, unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return out;
}

std::string Pad(const std::string& text, size_t width, bool right = false) {
  if (text.size() >= width) return text;
  const std::string fill(width - text.size(), ' ');
  return right ? fill + text : text + fill;
}

}  // namespace

std::string FormatSummary(const GraphSummary& s) {
  std::ostringstream out;
  out << "model        " << s.model << "\n";
  out << "fingerprint  " << s.fingerprint << "\n";
  out << "inputs       ";
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    out << (i ? ", " : "") << s.inputs[i].name << ": " << FormatTensorSpec(s.inputs[i]);
  }
  out << "  (" << s.input_source << ")\n";
  out << "outputs      ";
  for (size_t i = 0; i < s.outputs.size(); ++i) out << (i ? ", " : "") << s.outputs[i];
  out << "\n";
  out << "nodes        " << s.nodes << "\n";
  out << "parameters   " << s.params << " tensors, " << s.param_elements << " elements, "
      << HumanBytes(s.param_bytes) << "\n";
  out << "activations  " << HumanBytes(s.activation_bytes) << " (all node outputs of one forward)\n";
  char times[96];
  std::snprintf(times, sizeof times, "load %.0f ms, canonicalize %.0f ms", s.load_ms, s.canonicalize_ms);
  out << "time         " << times << "\n\n";

  out << Pad("layer", 12) << Pad("nodes", 12, true) << Pad("ids", 14, true) << Pad("params", 12, true)
      << Pad("param bytes", 14, true) << Pad("out bytes", 14, true) << "\n";
  for (const auto& layer : s.layers) {
    out << Pad(layer.name, 12) << Pad(std::to_string(layer.nodes), 12, true)
        << Pad(std::to_string(layer.first) + "-" + std::to_string(layer.last), 14, true)
        << Pad(std::to_string(layer.param_elements), 12, true)
        << Pad(HumanBytes(layer.param_bytes), 14, true) << Pad(HumanBytes(layer.out_bytes), 14, true)
        << "\n";
  }
  out << "\n" << Pad("node kind", 30) << Pad("count", 8, true) << "\n";
  for (const auto& [kind, count] : s.kinds) {
    out << Pad(kind, 30) << Pad(std::to_string(count), 8, true) << "\n";
  }
  return out.str();
}

nlohmann::json SummaryToJson(const GraphSummary& s) {
  nlohmann::json inputs = nlohmann::json::array();
  for (const auto& in : s.inputs) {
    nlohmann::json item = {{"name", in.name}, {"dtype", in.dtype}, {"shape", in.shape},
                           {"batch_dim", in.batch_dim}};
    if (in.has_range) item["range"] = {in.low, in.high};
    inputs.push_back(item);
  }
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : s.layers) {
    layers.push_back({{"name", l.name}, {"nodes", l.nodes}, {"first", l.first}, {"last", l.last},
                      {"params", l.params}, {"param_elements", l.param_elements},
                      {"param_bytes", l.param_bytes}, {"out_bytes", l.out_bytes}});
  }
  return {{"model", s.model},
          {"fingerprint", s.fingerprint},
          {"inputs", inputs},
          {"input_source", s.input_source},
          {"outputs", s.outputs},
          {"nodes", s.nodes},
          {"params", s.params},
          {"param_elements", s.param_elements},
          {"param_bytes", s.param_bytes},
          {"activation_bytes", s.activation_bytes},
          {"kinds", s.kinds},
          {"layers", layers},
          {"load_ms", s.load_ms},
          {"canonicalize_ms", s.canonicalize_ms}};
}

}  // namespace mp
