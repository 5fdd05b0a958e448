// The DP against the baselines on real measured profiles of zoo models:
// never worse on the bottleneck it optimises, and strictly better on the
// branchy model and ResNet-50, where equal node counts or parameter bytes
// are far from equal time.
#include "tests/doctest_torch.h"

#include "planner/graph/build_op_graph.h"
#include "planner/graph/model_file.h"
#include "planner/graph/run_graph.h"
#include "planner/partition/search.h"
#include "planner/profile/measure.h"
#include "../graph/zoo.h"

namespace {

struct Measured {
  mp::OpGraph graph;
  mp::Profile profile;
};

Measured Measure(const std::string& name, int64_t batch) {
  mp::ModelFile file = mp::LoadModelFile(mp::test::ZooPath(name));
  mp::CanonicalOptions canonical_options;
  canonical_options.training = true;
  const mp::CanonicalGraph canonical = mp::Canonicalize(file.module, canonical_options);
  const auto inputs = mp::WithBatch(file.input_spec, batch);
  Measured m;
  m.graph = mp::BuildOpGraph(canonical);
  mp::FillShapes(canonical, mp::SyntheticInputs(inputs), m.graph);
  mp::MeasureOptions options;
  options.training = true;
  options.microbatch_sizes = {1, batch};
  options.timing.warmup = 1;
  options.timing.repeats = 3;
  m.profile = mp::MeasureProfile(canonical, inputs, options);
  return m;
}

double Bottleneck(const Measured& m, const std::string& method, int stages) {
  mp::PlanRequest request;
  request.method = method;
  request.stages = stages;
  request.microbatches = static_cast<int>(m.profile.batch);  // micro-batch 1
  request.schedule = mp::ScheduleKind::kOneFOneB;
  const mp::Cluster cluster = mp::UniformCluster(4, mp::Device{});
  return mp::SearchPlan(m.graph, m.profile, cluster, request).partition.bottleneck_ms;
}

}  // namespace

TEST_CASE("on measured zoo profiles the DP is never worse than a baseline, and beats them all") {
  for (const auto& [name, batch] : {std::pair<const char*, int64_t>{"branchy.script.pt", 4}, {"resnet50.script.pt", 2}}) {
    CAPTURE(name);
    const Measured m = Measure(name, batch);
    for (int stages : {2, 4}) {
      CAPTURE(stages);
      const double dp = Bottleneck(m, "dp", stages);
      double best_baseline = 1e300;
      for (const char* baseline : {"uniform", "params", "block"}) {
        CAPTURE(baseline);
        const double other = Bottleneck(m, baseline, stages);
        CHECK(dp <= other * (1 + 1e-12));
        best_baseline = std::min(best_baseline, other);
      }
      if (stages == 4) CHECK(dp < best_baseline);
    }
  }
}
