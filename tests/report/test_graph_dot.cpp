// Graph DOT: one vertex per (layer, stage) group, filled with its stage's
// colour, deduplicated edges between groups, crossing edges labelled with
// bytes, a legend naming every stage; and `digraph` text that dot accepts
// (checked with dot where it is installed, else by its syntax).
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include "common/byte_size.h"
#include "common/error.h"
#include "planner/report/graph_dot.h"
#include "tests/report/report_lines.h"
#include "tests/report/sample_plan.h"

using namespace mp::testing;

namespace {

struct Vertex {
  std::string label;
  std::string fill;
};

// "3[label="layer1.0.conv1\n2 nodes", fillcolor="#aec7e8"];" -> vertex 3.
std::map<int, Vertex> Vertices(const std::string& dot) {
  static const std::regex vertex(R"re(^([0-9]+)\[label="([^"]*)", fillcolor="([^"]*)")re");
  std::map<int, Vertex> out;
  for (const std::string& line : Lines(dot)) {
    std::smatch m;
    if (std::regex_search(line, m, vertex)) out[std::stoi(m[1])] = {m[2], m[3]};
  }
  return out;
}

// "0->3 [label=...];" -> (0, 3) and the rest of the line.
std::vector<std::pair<std::pair<int, int>, std::string>> Edges(const std::string& dot) {
  static const std::regex edge(R"(^([0-9]+)->([0-9]+) (.*)$)");
  std::vector<std::pair<std::pair<int, int>, std::string>> out;
  for (const std::string& line : Lines(dot)) {
    std::smatch m;
    if (std::regex_search(line, m, edge)) out.push_back({{std::stoi(m[1]), std::stoi(m[2])}, m[3]});
  }
  return out;
}

}  // namespace

TEST_CASE("one vertex per (layer, stage) group with its node count and its stage's colour") {
  const mp::Plan plan = SamplePlan(3, 4);
  const mp::OpGraph graph = SampleGraph(3);
  const std::string dot = mp::GraphDot(graph, plan);
  Dump("graph_3.dot", dot);
  CHECK(StartsWith(dot, "digraph"));

  const std::vector<int> stage_of = mp::StageOfNode(plan);
  std::map<std::pair<std::string, int>, int> groups;
  for (const mp::OpNode& n : graph.nodes) ++groups[{n.layer, stage_of[n.id]}];
  REQUIRE(groups.size() == 10);  // 3 + 3 + 4, the relu layers split by the cuts
  const auto vertices = Vertices(dot);
  CHECK(vertices.size() == groups.size());

  std::set<std::string> labels;
  for (const auto& [key, count] : groups) {
    const std::string label =
        (key.first.empty() ? "(model)" : key.first) + "\\n" + std::to_string(count) + (count == 1 ? " node" : " nodes");
    labels.insert(label + " " + mp::StageColor(key.second));
  }
  std::set<std::string> found;
  for (const auto& [id, v] : vertices) found.insert(v.label + " " + v.fill);
  CHECK(found == labels);
  for (int s = 0; s < 3; ++s) {
    CAPTURE(s);
    CHECK(found.count("layer" + std::to_string(s + 1) + ".0.relu\\n1 node " + mp::StageColor(s)) == 1);
  }
  CHECK(found.count("layer1.0.relu\\n1 node " + mp::StageColor(1)) == 1);  // the split layer's other half
}

TEST_CASE("stage colours differ, cycle after 8, and each stage has a legend entry") {
  std::set<std::string> colours;
  for (int s = 0; s < 8; ++s) colours.insert(mp::StageColor(s));
  CHECK(colours.size() == 8);
  CHECK(mp::StageColor(8) == mp::StageColor(0));
  const mp::Plan plan = SamplePlan(4, 4);
  const std::string dot = mp::GraphDot(SampleGraph(4), plan);
  CHECK(Contains(dot, "subgraph cluster_legend {"));
  for (int s = 0; s < 4; ++s) {
    CHECK(Contains(dot, "legend" + std::to_string(s) + " [label=\"stage " + std::to_string(s) + ": A100-80GB #" +
                            std::to_string(s)));
    CHECK(Count(dot, "fillcolor=\"" + mp::StageColor(s) + "\"") >= 2);  // its vertices and its legend
  }
}

TEST_CASE("edges are deduplicated, crossing ones carry the bytes sent, constants draw none") {
  const mp::Plan plan = SamplePlan(3, 4);
  const std::string dot = mp::GraphDot(SampleGraph(3), plan);
  const auto vertices = Vertices(dot);
  const auto edges = Edges(dot);
  std::set<std::pair<int, int>> seen;
  int crossing = 0;
  for (const auto& edge : edges) {
    const auto& ends = edge.first;
    const auto& rest = edge.second;
    CAPTURE(rest);
    CHECK(seen.insert(ends).second);
    CHECK(ends.first != ends.second);
    CHECK(!StartsWith(vertices.at(ends.first).label, "(model)"));  // the constant's group
    const bool crosses = vertices.at(ends.first).fill != vertices.at(ends.second).fill;
    crossing += crosses;
    CHECK(Contains(rest, "label=") == crosses);
  }
  // Stage 0 -> 1, 1 -> 2 and the skip connection from stage 0 to 2 each
  // carry one tensor of the plan's sends, at the micro-batch size.
  CHECK(crossing == 3);
  CHECK(Count(dot, "[label=\"" + mp::FormatBytes(4 * 64 * 56 * 56 * 4) + "\"") == 3);
  // Within a stage the chain runs group to group.
  CHECK(edges.size() == 3 + 2 + 2 + 2);  // 0->1 crossing, 1->2 crossing, skip; 2 chain edges per stage after
}

TEST_CASE("the DOT text is balanced and quoted, and dot accepts it where installed") {
  mp::Plan plan = SamplePlan(3, 4);
  plan.devices[1].name = "GPU \"fast\" \\ one";
  const std::string dot = mp::GraphDot(SampleGraph(3), plan);
  CHECK(Count(dot, "{") == Count(dot, "}"));
  CHECK(Contains(dot, "GPU \\\"fast\\\" \\\\ one"));
  for (const std::string& line : Lines(dot)) {
    CAPTURE(line);
    int quotes = 0;
    for (size_t i = 0; i < line.size(); ++i)
      quotes += line[i] == '"' && (i == 0 || line[i - 1] != '\\' || line[i - 2] == '\\');
    CHECK(quotes % 2 == 0);
    CHECK((line.empty() || line.back() == ';' || line.back() == '{' || line.back() == '}'));
  }
  if (std::filesystem::exists("/usr/bin/dot")) {
    const auto path = std::filesystem::temp_directory_path() / "mp_test_graph.dot";
    WriteFile(path.string(), dot);
    CHECK(std::system(("/usr/bin/dot -Tsvg -o /dev/null '" + path.string() + "'").c_str()) == 0);
  } else {
    MESSAGE("graphviz dot not installed: checked the syntax by hand only");
  }
}

TEST_CASE("nodes in no stage are dashed, and a graph of another size is an input error") {
  mp::Plan plan = SamplePlan(3, 4);
  plan.stages[1].nodes = {{4, 5}};  // node 6 now belongs to no stage
  const std::string dot = mp::GraphDot(SampleGraph(3), plan);
  CHECK(Contains(dot, "fillcolor=\"#ffffff\", style=\"filled,rounded,dashed\"]"));
  CHECK(Contains(dot, "legend_none"));
  CHECK_THROWS_AS(mp::GraphDot(SampleGraph(4), plan), mp::InputError);
}
