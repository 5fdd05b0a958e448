// Partition quality on the same profile: mpplan's DP against the
// partitioners of the tools users would pick instead, all at 2 stages with
// the DP plan's micro-batch count and schedule: torchgpipe's block
// partition (balance_by_time), DeepSpeed's parameter balancing and uniform
// layer counts. Predicted by the same simulator, measured by mpexec.
#include "bench/suite/process.h"
#include "bench/suite/svg_chart.h"
#include "bench/suite/zoo_cases.h"

namespace mp::bench {

Section Partitioners(const Suite& suite) {
  Section section("partitioners");
  const std::vector<std::string> methods = {"dp", "block", "params", "uniform"};
  BarChart chart{
      "Partitioners at 2 stages, same profile: measured step / DP's measured step", "ratio to DP", {}, methods, {}};
  for (const ZooCase& z : ZooCases(suite)) {
    ZooProfile(suite, z);
    const std::string reuse = ReuseProfile(suite, z);
    std::vector<PlanCase> cases;
    for (const auto& method : methods) {
      std::string flags = reuse + " --gpus 2 --stages 2 --partitioner " + method;
      if (!cases.empty()) {
        flags += Format(" --microbatches %d --schedule %s", cases[0].plan.at("microbatches").get<int>(),
                        cases[0].plan.at("schedule").get<std::string>().c_str());
      }
      const std::string name = z.name + ".part." + method;
      cases.push_back({method, name, MakePlan(suite, z.file, flags, name)});
    }
    MeasurePlans(suite, cases, Pick(suite, 0, 2), Pick(suite, 1, 9), Pick(suite, 1, 2));
    chart.groups.push_back(z.name);
    chart.values.push_back({});
    std::string worst;
    double worst_ratio = 0;
    for (const auto& c : cases) {
      auto row = PlanRow(c);
      row["model"] = z.name;
      row["predicted_vs_dp"] =
          row.at("predicted_ms").get<double>() / cases[0].plan.at("predicted_step_ms").get<double>();
      row["measured_vs_dp"] = c.measured_ms / cases[0].measured_ms;
      chart.values.back().push_back(row.at("measured_vs_dp"));
      if (c.label != "dp" && row.at("measured_vs_dp").get<double>() > worst_ratio) {
        worst_ratio = row.at("measured_vs_dp"), worst = c.label;
      }
      section.rows.push_back(row);
    }
    std::string measured, predicted;
    for (const auto& row : section.rows) {
      if (row.at("model") != z.name || row.at("case") == "dp") continue;
      measured += Format("%s%s %.2f", measured.empty() ? "" : ", ", row.at("case").get<std::string>().c_str(),
                         row.at("measured_vs_dp").get<double>());
      predicted += Format("%s%.2f", predicted.empty() ? "" : ", ", row.at("predicted_vs_dp").get<double>());
    }
    section.summary.push_back({"partitioners vs DP, " + z.name + " (x DP's step)", measured, predicted,
                               Format("worst: %s at %.2fx", worst.c_str(), worst_ratio)});
  }
  WriteResult(suite, section.name + ".svg", RenderSvg(chart));
  return section;
}

}  // namespace mp::bench
