// GraphDot: a condensed view of the op graph. ResNet-50 has ~500 nodes, too
// many to read one box each, so nodes are merged by (layer, stage): one box
// per leaf module (layer1.0.conv1), split where a cut runs through it. The
// condensed graph is a Boost adjacency_list with bundled properties, written
// by boost::write_graphviz with property writers for the vertices, edges
// and the graph (defaults and the stage legend).
#include "planner/report/graph_dot.h"

#include <boost/graph/graphviz.hpp>
#include <map>
#include <set>
#include <sstream>

#include "common/error.h"
#include "common/byte_size.h"
#include "planner/report/report_format.h"
#include "planner/report/report_tables.h"

namespace mp {
namespace {

const char* kPalette[] = {"#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#dbdb8d"};

struct Group {
  std::string layer;
  int stage = -1;
  int nodes = 0;
};

struct Flow {
  int64_t bytes = 0;     // per micro-batch, over the distinct values
  bool crosses = false;  // from one stage to another
};

// bidirectionalS rather than directedS: write_graphviz then walks the edges
// through their list, not directedS's edge iterator, whose boost::optional
// trips GCC 12's -Wmaybe-uninitialized.
using GroupGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, Group, Flow>;

// A DOT double-quoted string.
std::string Quote(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c == '\n' ? ' ' : c;
  }
  return out + "\"";
}

struct VertexWriter {
  const GroupGraph& g;
  template <typename Vertex>
  void operator()(std::ostream& out, const Vertex& v) const {
    const Group& group = g[v];
    const std::string name = group.layer.empty() ? "(model)" : group.layer;
    // "\n" stays a DOT escape (a line break), so it is added after quoting.
    std::string label = Quote(name);
    label.insert(label.size() - 1, "\\n" + Plural(group.nodes, "node"));
    out << "[label=" << label;
    if (group.stage >= 0) {
      out << ", fillcolor=" << Quote(StageColor(group.stage));
    } else {
      out << ", fillcolor=\"#ffffff\", style=\"filled,rounded,dashed\"";
    }
    out << "]";
  }
};

struct EdgeWriter {
  const GroupGraph& g;
  template <typename Edge>
  void operator()(std::ostream& out, const Edge& e) const {
    const Flow& flow = g[e];
    if (!flow.crosses) return;
    out << "[label=" << Quote(FormatBytes(flow.bytes)) << ", color=\"#c0392b\", fontcolor=\"#c0392b\", penwidth=2]";
  }
};

struct GraphWriter {
  const Plan& plan;
  bool unassigned;
  void operator()(std::ostream& out) const {
    const std::string title = PlanHeadline(plan) + "; " + Plural(int64_t(plan.stages.size()), "stage") + " (" +
                              plan.partitioner + ", " + ScheduleName(plan.schedule) +
                              "); red edges cross a stage boundary, labelled with bytes per micro-batch";
    out << "graph [rankdir=TB, labelloc=t, fontname=\"Helvetica\", fontsize=14, label=" << Quote(title) << "];\n";
    out << "node [shape=box, style=\"filled,rounded\", fontname=\"Helvetica\", fontsize=10];\n";
    out << "edge [fontname=\"Helvetica\", fontsize=9, color=\"#888888\"];\n";
    out << "subgraph cluster_legend {\nlabel=\"stages\";\nfontsize=12;\n";
    for (const PlanStage& s : plan.stages) {
      const std::string text = "stage " + std::to_string(s.id) + ": " + DeviceLabel(plan, s) + ", " + LayerRange(s);
      out << "legend" << s.id << " [label=" << Quote(text) << ", fillcolor=" << Quote(StageColor(s.id)) << "];\n";
    }
    if (unassigned)
      out << "legend_none [label=\"in no stage\", fillcolor=\"#ffffff\", style=\"filled,rounded,dashed\"];\n";
    for (size_t i = 1; i < plan.stages.size(); ++i) {
      out << "legend" << plan.stages[i - 1].id << " -> legend" << plan.stages[i].id << " [style=invis];\n";
    }
    out << "}\n";
  }
};

}  // namespace

std::string StageColor(int stage) {
  const int n = int(sizeof kPalette / sizeof kPalette[0]);
  return kPalette[((stage % n) + n) % n];
}

std::string GraphDot(const OpGraph& graph, const Plan& plan) {
  if (plan.model.nodes != int(graph.nodes.size())) {
    throw InputError(Concat("graph dot: the plan is for a graph of ", plan.model.nodes, " nodes; this graph has ",
                            graph.nodes.size()));
  }
  const std::vector<int> stage_of = StageOfNode(plan);
  GroupGraph g;
  std::map<std::pair<std::string, int>, int> group_of_key;
  std::vector<int> group_of(graph.nodes.size());
  bool unassigned = false;
  for (const OpNode& node : graph.nodes) {
    const auto key = std::make_pair(node.layer, stage_of[node.id]);
    auto it = group_of_key.find(key);
    if (it == group_of_key.end()) {
      it = group_of_key.emplace(key, int(boost::add_vertex(Group{node.layer, key.second, 0}, g))).first;
    }
    group_of[node.id] = it->second;
    ++g[it->second].nodes;
    unassigned |= key.second < 0;
  }

  // Per micro-batch bytes of a value come from the plan's sends; values the
  // plan does not send fall back to the graph's own size.
  std::map<int, int64_t> sent_bytes;
  for (const PlanStage& s : plan.stages) {
    for (const PlanTensor& t : s.sends) sent_bytes[t.value_id] = t.bytes;
  }
  std::map<std::pair<int, int>, Flow> flows;
  for (const OpValue& value : graph.values) {
    if (value.producer < 0 || value.producer >= int(graph.nodes.size()) || value.rematerializable) continue;
    const int from = group_of[value.producer];
    std::set<int> targets;
    for (int consumer : value.consumers) {
      if (consumer >= 0 && consumer < int(graph.nodes.size()) && group_of[consumer] != from) {
        targets.insert(group_of[consumer]);
      }
    }
    for (int to : targets) {
      Flow& flow = flows[{from, to}];
      if (g[from].stage != g[to].stage) {
        flow.crosses = true;
        const auto sent = sent_bytes.find(value.id);
        flow.bytes += sent != sent_bytes.end() ? sent->second : value.bytes;
      }
    }
  }
  for (const auto& [ends, flow] : flows) boost::add_edge(ends.first, ends.second, flow, g);

  std::ostringstream out;
  boost::write_graphviz(out, g, VertexWriter{g}, EdgeWriter{g}, GraphWriter{plan, unassigned});
  return out.str();
}

}  // namespace mp
