// BuildPlan: what the plan says about its stages, and the warnings a user
// needs before running it.
#include <doctest/doctest.h>

#include <algorithm>

#include "planner/plan_build/plan_build.h"
#include "tests/plan/plan_fixture.h"

namespace {

using mp::testing::PlanFixture;

bool HasWarning(const mp::Plan& plan, const std::string& text) {
  return std::any_of(plan.warnings.begin(), plan.warnings.end(),
                     [&](const std::string& w) { return w.find(text) != std::string::npos; });
}

}  // namespace

TEST_CASE("stages carry their nodes, layers, tensors and predictions") {
  const PlanFixture f;
  const mp::Plan& plan = f.plan;
  REQUIRE(plan.stages.size() == 3);
  CHECK(plan.stages[0].layers.front() == "layer0");
  CHECK(plan.stages[2].layers.back() == "layer5");
  for (size_t s = 0; s + 1 < plan.stages.size(); ++s) {
    REQUIRE(plan.stages[s].sends.size() == 1);
    const mp::PlanTensor& sent = plan.stages[s].sends[0];
    CHECK(sent.peer == int(s) + 1);
    CHECK(sent.bytes == 1000 * plan.microbatch_size);
    // What one stage sends, the next receives.
    REQUIRE(plan.stages[s + 1].receives.size() == 1);
    CHECK(plan.stages[s + 1].receives[0].value_id == sent.value_id);
    CHECK(plan.stages[s].send_ms > 0);
    CHECK(plan.stages[s + 1].send_gradients_ms > 0);
  }
  double busiest = 0;
  for (const mp::PlanStage& s : plan.stages) busiest = std::max(busiest, s.busy_fraction);
  CHECK(busiest <= 1.0);
  CHECK(plan.predicted.samples_per_s == doctest::Approx(8 * 1000.0 / plan.predicted.step_ms));
  // One device runs the whole batch as one micro-batch: 30 ms forward + 60 backward.
  CHECK(plan.predicted.one_device_step_ms == doctest::Approx(90.0));
  CHECK(plan.predicted.speedup_vs_one_device == doctest::Approx(90.0 / plan.predicted.step_ms));
}

TEST_CASE("warnings: a stage near its memory limit, a pipeline slower than one device") {
  const PlanFixture roomy;
  CHECK(roomy.plan.warnings.empty());
  int64_t peak = 0;
  for (const mp::PlanStage& s : roomy.plan.stages) peak = std::max(peak, s.peak_memory_bytes);
  // A limit just above the largest stage's peak: the plan still fits, with a warning.
  const PlanFixture tight(3, true, peak * 100 / 95);
  CHECK(HasWarning(tight.plan, "little room for the allocator"));

  // Forcing 3 stages over a link that takes a second per tensor.
  PlanFixture slow;
  slow.cluster.links = {mp::Link{1e3, 0}};
  slow.request.stages = 3;
  slow.request.microbatches = 1;
  const mp::SearchResult result = mp::SearchPlan(slow.builder.graph, slow.builder.profile, slow.cluster, slow.request);
  mp::PlanSource source;
  for (int i = 0; i < 3; ++i) source.devices.push_back(mp::PlanDevice{i, "cpu", i, "dev", 0, 1.0});
  const mp::Plan plan = mp::BuildPlan(slow.builder.graph, slow.builder.profile, slow.cluster, slow.request, result, source);
  CHECK(HasWarning(plan, "predicted slower than one device"));
}

TEST_CASE("layer names: a whole top-level module, or its children") {
  mp::testing::GraphBuilder b;
  int v = b.Input(4);
  for (const char* layer : {"stem", "block.0.conv", "block.0.relu", "block.1.conv", "block.2.conv", "head"}) {
    v = b.Node(layer, {v}, 1, 2, 4);
  }
  b.Constant("block.2");  // constants never name a stage's layers
  const std::vector<int> first = {0, 1, 2, 6};
  CHECK(mp::StageLayers(b.graph, first) == std::vector<std::string>{"stem", "block.0"});
  CHECK(mp::StageLayers(b.graph, {0, 1, 2, 3, 4}) == std::vector<std::string>{"stem", "block"});
  CHECK(mp::StageLayers(b.graph, {3, 4, 5}) == std::vector<std::string>{"block.1", "block.2", "head"});
}

TEST_CASE("warnings: node times that do not add up to the whole graph, once scaled to it") {
  PlanFixture f;
  const auto plan_with = [&](double coverage, std::vector<std::vector<double>> scale) {
    f.builder.profile.coverage = coverage;
    f.builder.profile.whole_scale = std::move(scale);
    const mp::SearchResult result = mp::SearchPlan(f.builder.graph, f.builder.profile, f.cluster, f.request);
    mp::PlanSource source;
    for (int i = 0; i < 3; ++i) source.devices.push_back(mp::PlanDevice{i, "cpu", i, "dev", 0, 1.0});
    return mp::BuildPlan(f.builder.graph, f.builder.profile, f.cluster, f.request, result, source);
  };
  // A profile from before the scaling: its coverage as it is.
  CHECK(HasWarning(plan_with(1.3, {}), "the per-node profile adds up to 130% of the whole-graph forward time"));
  CHECK_FALSE(HasWarning(plan_with(1.1, {}), "adds up to"));
  // Scaled to the whole graph: what is left after the scaling.
  const size_t sizes = f.builder.profile.microbatch_sizes.size();
  CHECK_FALSE(HasWarning(plan_with(1.3, std::vector<std::vector<double>>(sizes, {1 / 1.3, 1})), "adds up to"));
  CHECK(HasWarning(plan_with(2.8, std::vector<std::vector<double>>(sizes, {1 / 1.4, 1})),
                   "the per-node profile adds up to 200% of the whole-graph forward time"));
}

TEST_CASE("warnings: pinned CPU workers whose cores ran apart while profiling") {
  PlanFixture f;
  const auto plan_with = [&](std::vector<double> speeds) {
    f.builder.profile.worker_speed = std::move(speeds);
    const mp::SearchResult result = mp::SearchPlan(f.builder.graph, f.builder.profile, f.cluster, f.request);
    mp::PlanSource source;
    for (int i = 0; i < 3; ++i) source.devices.push_back(mp::PlanDevice{i, "cpu", i, "dev", 0, 1.0});
    return mp::BuildPlan(f.builder.graph, f.builder.profile, f.cluster, f.request, result, source);
  };
  // Worker 2 the furthest from worker 0, either way; within 10% says nothing.
  CHECK(HasWarning(plan_with({1, 1.05, 1.6}), "CPU worker 2's cores ran the model in 1.60x worker 0's time"));
  CHECK(HasWarning(plan_with({1, 0.5, 1.2}), "CPU worker 1's cores ran the model in 0.50x worker 0's time"));
  CHECK(plan_with({1, 1.08, 0.95}).warnings.empty());
  CHECK(plan_with({}).warnings.empty());
  // One stage runs on worker 0's cores, where the profile was taken.
  f.request.stages = 1;
  CHECK(plan_with({1, 1.6, 1.6}).warnings.empty());
}
