// The tutorial's ResNet-50 experiment (../shared/seeds): training on random
// inputs, MSE against one-hot labels, SGD lr 0.001, batches of 120 at
// 128x128. One device; the tutorial's hand split (layer1,layer2 |
// layer3,layer4,fc) without micro-batches; the hand split pipelined (GPipe,
// as the tutorial's forward does) at split sizes 1 to 60; and mpplan's own
// plan. Every plan comes from one profile measured here, so the predicted
// curve and the measured one are for the same splits.
#include <set>

#include "bench/suite/process.h"
#include "bench/suite/svg_chart.h"
#include "planner/profile/profile.h"

namespace mp::bench {
namespace {

const char* const kResNetModel = "resnet50.script.pt";
const char* const kSplit = "'layer1,layer2|layer3,layer4,fc'";

std::string Speedup(double base, double ms) { return Format("%.2fx of one device", base / ms); }

}  // namespace

Section TutorialResNet(const Suite& suite) {
  Section section("tutorial_resnet50");
  const int64_t batch = Pick<int64_t>(suite, 8, 120), image = Pick<int64_t>(suite, 32, 128);
  // A smoke run's 32x32 images leave layer4 1x1: BatchNorm cannot train on
  // one sample there, so its splits start at 2.
  const std::vector<int64_t> splits =
      suite.smoke ? std::vector<int64_t>{2, 4} : std::vector<int64_t>{1, 3, 5, 8, 10, 12, 20, 40, 60};
  const std::string input = Format("'float32[%ld,3,%ld,%ld]'", long(batch), long(image), long(image));
  std::set<int64_t> sizes(splits.begin(), splits.end());
  sizes.insert(batch);
  if (!suite.smoke) sizes.insert(24);  // between 20 and 40, where mpplan's choice tends to be
  const std::string size_list = SizeList({sizes.begin(), sizes.end()});

  const std::string profile = suite.out + "/tutorial_resnet50.profile.yaml";
  std::vector<PlanCase> cases;
  const auto own = MakePlan(suite, kResNetModel,
                            "--gpus 2 --input " + input + " --microbatch-sizes " + size_list + " --profile-out '" +
                                profile + "' --split " + kSplit + " --explain",
                            "resnet50.mpplan");
  const std::string reuse = "--profile-in '" + profile + "' --input " + input + " ";
  const std::string hand = reuse + "--gpus 2 --stages 2 --partitioner layers --split " + kSplit + " --schedule gpipe ";
  cases.push_back({"one device", "resnet50.one",
                   MakePlan(suite, kResNetModel, reuse + "--gpus 1 --stages 1 --microbatches 1", "resnet50.one")});
  cases.push_back({"hand split, no micro-batches", "resnet50.hand",
                   MakePlan(suite, kResNetModel, hand + "--microbatches 1", "resnet50.hand")});
  for (int64_t s : splits) {
    const std::string name = "resnet50.split" + std::to_string(s);
    cases.push_back({Format("hand split, split size %ld", long(s)), name,
                     MakePlan(suite, kResNetModel, hand + "--microbatches " + std::to_string(batch / s), name)});
  }
  cases.push_back({"mpplan's plan", "resnet50.mpplan", own});
  // One warm-up step even in a smoke run: a cold first step (a fresh
  // process's allocations and caches) read 1313 ms against 194 predicted
  // for one device, and the table does not say which steps it timed.
  MeasurePlans(suite, cases, 1, Pick(suite, 1, 2), Pick(suite, 1, 2));

  const double one = cases[0].measured_ms, one_predicted = cases[0].plan.at("predicted_step_ms");
  LineChart chart;
  chart.title =
      Format("ResNet-50, batch %ld at %ldx%ld, training, 2 CPU workers", long(batch), long(image), long(image));
  chart.x_label = "split size (samples per micro-batch), hand split layer1,layer2 | layer3,layer4,fc, GPipe";
  chart.y_label = "step time (ms)";
  chart.log_x = true;
  Series measured, predicted;
  measured.name = "hand split, measured", measured.color = "#1f77b4";
  predicted.name = "hand split, predicted", predicted.color = "#ff7f0e", predicted.dashed = true;
  const PlanCase* best = nullptr;
  for (const auto& c : cases) {
    auto row = PlanRow(c);
    row["speedup_measured"] = one / c.measured_ms;
    row["speedup_predicted"] = one_predicted / row.at("predicted_ms").get<double>();
    section.rows.push_back(row);
    if (c.name.rfind("resnet50.split", 0) == 0) {
      const double x = c.plan.at("microbatch_size");
      measured.points.push_back({x, c.measured_ms});
      predicted.points.push_back({x, row.at("predicted_ms")});
      if (!best || c.measured_ms < best->measured_ms) best = &c;
    }
  }
  chart.series = {measured, predicted};
  chart.levels = {{"one device, measured", "#555555", one},
                  {"hand split, no micro-batches, measured", "#2ca02c", cases[1].measured_ms}};
  const PlanCase& chosen = cases.back();
  const std::string chosen_label =
      Format("mpplan: %d stages x %d of %d, %s", chosen.plan.at("stages").get<int>(),
             chosen.plan.at("microbatches").get<int>(), chosen.plan.at("microbatch_size").get<int>(),
             chosen.plan.at("schedule").get<std::string>().c_str());
  chart.marks = {
      {chosen_label + ", measured", "#d62728", chosen.plan.at("microbatch_size").get<double>(), chosen.measured_ms}};
  WriteResult(suite, section.name + ".svg", RenderSvg(chart));

  const auto line = [&](const std::string& what, const PlanCase& c, const std::string& reading) {
    section.summary.push_back({what, Format("%.0f ms", c.measured_ms),
                               Format("%.0f ms", c.plan.at("predicted_step_ms").get<double>()), reading});
  };
  line("ResNet-50 tutorial: one device", cases[0], "");
  line("  hand split, no micro-batches", cases[1], Speedup(one, cases[1].measured_ms));
  line(Format("  hand split, best split size (%d)", best->plan.at("microbatch_size").get<int>()), *best,
       Speedup(one, best->measured_ms));
  line("  " + chosen_label, chosen,
       Speedup(one, chosen.measured_ms) + Format(", %.2fx of the best split", best->measured_ms / chosen.measured_ms));
  return section;
}

}  // namespace mp::bench
