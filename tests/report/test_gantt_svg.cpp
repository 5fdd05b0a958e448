// Gantt SVG: one forward and one backward box per stage per micro-batch,
// every box inside the viewBox, no two boxes on a row overlapping, transfers
// in the sub-lane, and a well-formed XML file (checked with xmllint where it
// is installed).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include "common/error.h"
#include "planner/report/gantt_svg.h"
#include "planner/report/report_format.h"
#include "tests/report/report_lines.h"
#include "tests/report/sample_plan.h"

using namespace mp::testing;

namespace {

struct Box {
  std::string cls;
  int stage = -1;
  double x = 0, y = 0, w = 0, h = 0;
  std::string title;  // "0F3: 10.00–20.00 ms"
};

// Every <rect> with a class, and the stage group it is in.
std::vector<Box> Boxes(const std::string& svg) {
  static const std::regex rect(
      R"re(<rect class="([^"]+)" x="([-0-9.]+)" y="([-0-9.]+)" width="([-0-9.]+)" height="([-0-9.]+)")re"
      R"re((?:><title>([^<]*)</title>)?)re");
  std::vector<Box> boxes;
  int stage = -1;
  for (const std::string& line : Lines(svg)) {
    if (StartsWith(line, "<g id=\"stage-")) stage = std::stoi(line.substr(13));
    if (line == "</g>") stage = -1;
    std::smatch m;
    if (!std::regex_search(line, m, rect)) continue;
    boxes.push_back({m[1], stage, std::stod(m[2]), std::stod(m[3]), std::stod(m[4]), std::stod(m[5]), m[6]});
  }
  return boxes;
}

std::pair<double, double> ViewBox(const std::string& svg) {
  static const std::regex view_box(R"re(viewBox="0 0 ([0-9.]+) ([0-9.]+)")re");
  std::smatch m;
  REQUIRE(std::regex_search(svg, m, view_box));
  return {std::stod(m[1]), std::stod(m[2])};
}

// Runs xmllint on the SVG; false when it is not installed.
bool CheckXml(const std::string& svg, const std::string& name) {
  if (!std::filesystem::exists("/usr/bin/xmllint")) {
    MESSAGE("xmllint not installed: skipping the well-formedness check");
    return false;
  }
  const auto path = std::filesystem::temp_directory_path() / ("mp_test_" + name + ".svg");
  WriteFile(path.string(), svg);
  const int rc = std::system(("/usr/bin/xmllint --noout '" + path.string() + "'").c_str());
  CHECK_MESSAGE(rc == 0, "xmllint rejects " << path.string());
  if (rc == 0) std::filesystem::remove(path);
  return true;
}

void CheckChart(const mp::Plan& plan, const std::string& name) {
  const mp::SimResult sim = mp::SimulatePlan(plan);
  const std::string svg = mp::GanttSvg(plan, sim);
  Dump(name + ".svg", svg);
  const int K = int(plan.stages.size()), M = plan.microbatches;
  CHECK(StartsWith(svg, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\""));
  CHECK(Contains(svg, "width=\"1200\""));
  CHECK(Count(svg, "class=\"box fwd\"") == K * M);
  CHECK(Count(svg, "class=\"box bwd\"") == (plan.training ? K * M : 0));

  const auto [width, height] = ViewBox(svg);
  const std::vector<Box> boxes = Boxes(svg);
  std::map<std::pair<int, std::string>, std::vector<Box>> rows;  // (stage, lane) -> boxes
  std::map<int, std::set<std::string>> actions;
  for (const Box& b : boxes) {
    CAPTURE(b.cls);
    CAPTURE(b.title);
    CHECK(b.x >= 0);
    CHECK(b.y >= 0);
    CHECK(b.w > 0);
    CHECK(b.x + b.w <= width);
    CHECK(b.y + b.h <= height);
    if (StartsWith(b.cls, "box ")) {
      REQUIRE(b.stage >= 0);
      rows[{b.stage, "compute"}].push_back(b);
      actions[b.stage].insert(b.title.substr(0, b.title.find(':')));
    } else if (StartsWith(b.cls, "xfer ")) {
      rows[{b.stage, b.cls}].push_back(b);
    }
  }
  // One F and (training) one B per micro-batch on each stage's own row.
  for (int s = 0; s < K; ++s) {
    CAPTURE(s);
    CHECK(actions[s].size() == size_t(plan.training ? 2 * M : M));
    for (int mb = 0; mb < M; ++mb) {
      CHECK(actions[s].count(std::to_string(s) + "F" + std::to_string(mb)) == 1);
      if (plan.training) CHECK(actions[s].count(std::to_string(s) + "B" + std::to_string(mb)) == 1);
    }
  }
  // Boxes in one lane never overlap, and rows lie apart vertically.
  for (auto& row : rows) {
    auto& key = row.first;
    auto& lane = row.second;
    std::sort(lane.begin(), lane.end(), [](const Box& a, const Box& b) { return a.x < b.x; });
    for (size_t i = 1; i < lane.size(); ++i) {
      CAPTURE(lane[i - 1].title);
      CAPTURE(lane[i].title);
      CHECK(lane[i - 1].x + lane[i - 1].w <= lane[i].x + 1e-9);
    }
    if (key.first > 0) CHECK(rows[{key.first - 1, "compute"}][0].y + 26 < lane[0].y);
  }
  // Transfers: every SEND that takes time has a thin box under its stage.
  int sends = 0;
  for (const auto& timeline : sim.timeline) {
    for (const mp::TimedAction& t : timeline) sends += mp::IsSend(t.action.kind) && t.end_ms > t.start_ms;
  }
  CHECK(sends > 0);
  CHECK(Count(svg, "class=\"xfer ") == sends);
  CheckXml(svg, name);
}

}  // namespace

TEST_CASE("4 stages x 8 micro-batches, 1f1b: boxes, lanes, transfers, viewBox, XML") {
  CheckChart(SamplePlan(4, 8), "gantt_4x8_1f1b");
}

TEST_CASE("3 stages x 4 micro-batches gpipe, and forward-only inference") {
  CheckChart(SamplePlan(3, 4, mp::ScheduleKind::kGPipe), "gantt_3x4_gpipe");
  CheckChart(SamplePlan(3, 4, mp::ScheduleKind::kForwardOnly), "gantt_3x4_forward");
}

TEST_CASE("many micro-batches: boxes too narrow for their number go unlabelled but still do not overlap") {
  CheckChart(SamplePlan(2, 64), "gantt_2x64");
}

TEST_CASE("title, legend, stage labels and axis are present") {
  const mp::Plan plan = SamplePlan(4, 8);
  const mp::SimResult sim = mp::SimulatePlan(plan);
  const std::string svg = mp::GanttSvg(plan, sim);
  CHECK(
      Contains(svg, "4 stages \xC3\x97 8 micro-batches of 4, 1f1b \xE2\x80\x94 " + mp::FormatMs(sim.step_ms) + " ms"));
  for (int s = 0; s < 4; ++s) {
    CHECK(Contains(svg, ">stage " + std::to_string(s) + " \xC2\xB7 A100-80GB #" + std::to_string(s) + "</text>"));
  }
  for (const char* item : {">forward", ">backward", ">activations sent", ">gradients sent", ">idle", ">time (ms)<"}) {
    CHECK(Contains(svg, item));
  }
  CHECK(Count(svg, "class=\"grid\"") >= 5);
}

TEST_CASE("names are escaped") {
  mp::Plan plan = SamplePlan(2, 2);
  plan.devices[0].name = "<GPU & \"co\">";
  const std::string svg = mp::GanttSvg(plan, mp::SimulatePlan(plan));
  CHECK(Contains(svg, "&lt;GPU &amp; &quot;co&quot;&gt;"));
  CHECK_FALSE(Contains(svg, "<GPU"));
  CheckXml(svg, "escaped");
}

TEST_CASE("a simulation of another plan is an input error") {
  const mp::Plan plan = SamplePlan(3, 4);
  CHECK_THROWS_AS(mp::GanttSvg(plan, mp::SimulatePlan(SamplePlan(2, 4))), mp::InputError);
}

TEST_CASE("replicas: each stage's gradient all-reduce is a box after its last action, in the step") {
  mp::Plan plan = SamplePlan(3, 4);
  plan.replicas = 2;
  for (mp::PlanStage& s : plan.stages) s.allreduce_ms = 2.0 + s.id;
  CheckChart(plan, "gantt_3x4_replicas");
  const mp::SimResult sim = mp::SimulatePlan(plan);
  const std::string svg = mp::GanttSvg(plan, sim);
  CHECK(Count(svg, "class=\"allreduce\"") == 3);
  CHECK(Count(svg, "<title>gradient all-reduce over 2 replicas: ") == 3);
  CHECK(Contains(svg, ">gradient all-reduce over the replicas</text>"));  // the legend
  CHECK(sim.step_ms > mp::SimulatePlan(SamplePlan(3, 4)).step_ms);
  CHECK(!Contains(mp::GanttSvg(SamplePlan(3, 4), mp::SimulatePlan(SamplePlan(3, 4))), "all-reduce"));
}

TEST_CASE("the optimizer's step: a box on each device after its list and all-reduce, the step's end") {
  mp::Plan plan = SamplePlan(3, 4);
  plan.optimizer = "adam";
  plan.replicas = 2;
  for (mp::PlanStage& s : plan.stages) s.allreduce_ms = 1, s.optimizer_ms = 2.0 + s.id;
  const mp::SimResult sim = mp::SimulatePlan(plan);
  const std::string svg = mp::GanttSvg(plan, sim);
  CHECK(Count(svg, "class=\"optimizer\"") == 3);
  CHECK(Count(svg, "<title>adam step on its parameters: ") == 3);
  CHECK(Contains(svg, ">optimizer step</text>"));  // the legend
  CHECK(sim.optimizer_ms == std::vector<double>{2, 3, 4});
  const std::string plain = mp::GanttSvg(SamplePlan(3, 4), mp::SimulatePlan(SamplePlan(3, 4)));
  CHECK(Count(plain, "class=\"optimizer\"") == 0);
  CHECK(!Contains(plain, ">optimizer step</text>"));
}

TEST_CASE("the plan's error band is shaded around the step's end, and the axis reaches its top") {
  mp::Plan plan = SamplePlan(3, 4);
  const mp::SimResult sim = mp::SimulatePlan(plan);
  plan.predicted.step_ms = sim.step_ms;
  plan.predicted.step_low_ms = 0.9 * sim.step_ms;
  plan.predicted.step_high_ms = 1.2 * sim.step_ms;
  CheckChart(plan, "gantt_3x4_band");
  const std::string svg = mp::GanttSvg(plan, sim);
  CHECK(Contains(svg, ">error band of the step</text>"));  // the legend
  CHECK(Contains(svg, "step " + mp::FormatMs(sim.step_ms) + " ms [" + mp::FormatMs(0.9 * sim.step_ms) + ", " +
                          mp::FormatMs(1.2 * sim.step_ms) + "]</text>"));
  std::vector<Box> shaded, compute;
  for (const Box& b : Boxes(svg)) {
    if (b.cls == "stepband") shaded.push_back(b);
    if (StartsWith(b.cls, "box ")) compute.push_back(b);
  }
  REQUIRE(shaded.size() == 1);
  REQUIRE(!compute.empty());
  // The axis spans 0..1.2 step: the band is 0.3 / 1.2 of the plot, and the
  // last box ends at 1 / 1.2 of it, inside the band.
  double left = 1e9, last = 0;
  for (const Box& b : compute) left = std::min(left, b.x), last = std::max(last, b.x + b.w);
  const double plot = shaded[0].x + shaded[0].w - left;
  CHECK(shaded[0].w / plot == doctest::Approx(0.3 / 1.2).epsilon(0.01));
  CHECK(last > shaded[0].x);
  CHECK(last < shaded[0].x + shaded[0].w);
  CHECK(Contains(shaded[0].title, "error band of the step: "));
  // Without a band, nothing is shaded and the step ends at the right edge.
  const std::string bare = mp::GanttSvg(SamplePlan(3, 4), sim);
  CHECK_FALSE(Contains(bare, "class=\"stepband\""));
  CHECK_FALSE(Contains(bare, "error band"));
}
