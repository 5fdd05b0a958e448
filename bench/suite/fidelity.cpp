// Prediction fidelity: every training zoo model planned for this machine's
// CPU workers at 1 and 2 stages (the machine has 2 cores; more stages would
// measure oversubscription, which the ConvNet section shows), predicted step
// against the step mpexec measures, with the error.
#include <algorithm>

#include "bench/suite/process.h"
#include "bench/suite/svg_chart.h"
#include "bench/suite/zoo_cases.h"

namespace mp::bench {

Section Fidelity(const Suite& suite) {
  Section section("fidelity");
  BarChart chart{
      "Prediction error: measured / predicted step - 1 (%)", "error (%), absolute", {}, {"1 stage", "2 stages"}, {}};
  for (const ZooCase& z : ZooCases(suite)) {
    ZooProfile(suite, z);
    std::vector<PlanCase> cases;
    for (int stages : {1, 2}) {
      const std::string name = z.name + ".stages" + std::to_string(stages);
      cases.push_back(
          {Format("%d stage%s", stages, stages > 1 ? "s" : ""), name,
           MakePlan(suite, z.file, ReuseProfile(suite, z) + Format(" --gpus 2 --stages %d", stages), name)});
    }
    // Enough steps for about a second of stepping.
    const double slowest = std::max(cases[0].plan.at("predicted_step_ms").get<double>(),
                                    cases[1].plan.at("predicted_step_ms").get<double>());
    MeasurePlans(suite, cases, Pick(suite, 1, 3), Pick(suite, 2, std::clamp(int(1000 / slowest), 5, 101)),
                 Pick(suite, 1, 2));
    chart.groups.push_back(z.name);
    chart.values.push_back({});
    for (const auto& c : cases) {
      auto row = PlanRow(c);
      row["model"] = z.name;
      chart.values.back().push_back(std::abs(row.at("error_pct").get<double>()));
      section.summary.push_back(
          {"fidelity, " + z.name + ", " + c.label + Format(" x %d micro-batches", row.at("microbatches").get<int>()),
           Format("%.1f ms", c.measured_ms), Format("%.1f ms", row.at("predicted_ms").get<double>()),
           Format("%+.1f%%", row.at("error_pct").get<double>())});
      section.rows.push_back(row);
    }
  }
  WriteResult(suite, section.name + ".svg", RenderSvg(chart));
  return section;
}

}  // namespace mp::bench
