// The tutorial's 4-device CIFAR ConvNet (../shared/seeds), which ran slower
// pipelined over 4 GPUs than on one: each of its layers is a fraction of a
// millisecond, so the hand-offs cost more than the overlap gains. Here: one
// device; the tutorial's split (one layer group per device, split size 8,
// GPipe); mpplan's best 4-stage plan; and mpplan's own choice for 4 devices.
// The claim to check: mpplan predicts the pipeline loses and picks fewer
// stages, and the measurement agrees.
#include "bench/suite/process.h"
#include "bench/suite/svg_chart.h"

namespace mp::bench {
namespace {

const char* const kConvNetModel = "convnet.script.pt";

}  // namespace

Section TutorialConvNet(const Suite& suite) {
  Section section("tutorial_convnet");
  const int64_t batch = Pick<int64_t>(suite, 16, 64), split = 8;  // the tutorial's split size
  const std::string profile = suite.out + "/tutorial_convnet.profile.yaml";
  const std::string batch_flag = " --batch " + std::to_string(batch);
  const auto own =
      MakePlan(suite, kConvNetModel, "--gpus 4 --profile-out '" + profile + "'" + batch_flag, "convnet.mpplan");
  const std::string reuse = "--profile-in '" + profile + "'" + batch_flag + " ";
  std::vector<PlanCase> cases = {
      {"one device", "convnet.one",
       MakePlan(suite, kConvNetModel, reuse + "--gpus 1 --stages 1 --microbatches 1", "convnet.one")},
      {Format("tutorial: conv1 | conv2 | fc | out, split size %ld", long(split)), "convnet.tutorial",
       MakePlan(suite, kConvNetModel,
                reuse +
                    "--gpus 4 --stages 4 --partitioner layers --split 'conv1|conv2|fc|out' --schedule gpipe "
                    "--microbatches " +
                    std::to_string(batch / split),
                "convnet.tutorial")},
      {"mpplan, 4 devices forced", "convnet.four",
       MakePlan(suite, kConvNetModel, reuse + "--gpus 4 --stages 4", "convnet.four")},
      {"mpplan's choice for 4 devices", "convnet.mpplan", own}};
  MeasurePlans(suite, cases, Pick(suite, 1, 5), Pick(suite, 3, 51), Pick(suite, 1, 3));

  const double one = cases[0].measured_ms, one_predicted = cases[0].plan.at("predicted_step_ms");
  BarChart chart{Format("CIFAR ConvNet, batch %ld, training, on up to 4 CPU workers", long(batch)),
                 "step time (ms)",
                 {},
                 {"predicted", "measured"},
                 {}};
  for (const auto& c : cases) {
    auto row = PlanRow(c);
    row["slower_than_one_measured"] = c.measured_ms > one;
    row["slower_than_one_predicted"] = row.at("predicted_ms").get<double>() > one_predicted;
    section.rows.push_back(row);
    chart.groups.push_back(c.name.substr(c.name.find('.') + 1));
    chart.values.push_back({row.at("predicted_ms").get<double>(), c.measured_ms});
  }
  WriteResult(suite, section.name + ".svg", RenderSvg(chart));

  for (const auto& c : cases) {
    const double predicted = c.plan.at("predicted_step_ms");
    section.summary.push_back({(&c == &cases[0] ? "ConvNet, 4 devices: " : "  ") + c.label +
                                   Format(" (%d stages)", c.plan.at("stages").get<int>()),
                               Format("%.2f ms (%.2fx one)", c.measured_ms, c.measured_ms / one),
                               Format("%.2f ms (%.2fx one)", predicted, predicted / one_predicted),
                               &c == &cases[0]                                        ? ""
                               : (c.measured_ms > one) == (predicted > one_predicted) ? "agrees"
                                                                                      : "disagrees"});
  }
  return section;
}

}  // namespace mp::bench
