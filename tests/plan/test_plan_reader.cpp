// The plan reader: a plan round-trips exactly, and every validation error
// names the key path a user has to fix.
#include <doctest/doctest.h>
#include <yaml-cpp/yaml.h>

#include <functional>

#include "common/error.h"
#include "planner/plan/plan_reader.h"
#include "planner/plan/plan_writer.h"
#include "tests/plan/plan_fixture.h"

namespace {

using mp::testing::PlanFixture;

std::string Mutated(const std::string& yaml, const std::function<void(YAML::Node&)>& edit) {
  YAML::Node root = YAML::Load(yaml);
  edit(root);
  return YAML::Dump(root);
}

// The one-line error ParsePlan gives for `yaml`, or "" when it accepts it.
std::string ErrorOf(const std::string& yaml) {
  try {
    mp::ParsePlan(yaml, "plan.yaml");
  } catch (const mp::InputError& e) {
    return e.what();
  }
  return "";
}

void CheckError(const std::string& yaml, const std::string& expected) {
  const std::string error = ErrorOf(yaml);
  INFO("error: " << error);
  CHECK(error.rfind("plan.yaml: " + expected, 0) == 0);
  // One line, which says it all; a schedule that cannot run adds the grid
  // of its action lists below it, as torch.distributed.pipelining does.
  const size_t newline = error.find('\n');
  CHECK((newline == std::string::npos || error.compare(newline, 17, "\n          Rank 0") == 0));
}

}  // namespace

TEST_CASE("a v1 plan, one action list per stage, still reads, and is written back as v2") {
  PlanFixture f(3, true);
  const std::string yaml = mp::PlanToYaml(f.plan);
  YAML::Node v1 = YAML::Load(yaml);
  v1["format"] = "mpplan/v1";
  for (size_t s = 0; s < 3; ++s) v1["stages"][s]["actions"] = v1["programs"][s]["actions"];
  v1.remove("programs");
  YAML::Emitter out;
  out << v1;
  const mp::Plan back = mp::ParsePlan(out.c_str(), "old.plan.yaml");
  CHECK(back.format == "mpplan/v1");
  REQUIRE(back.programs.size() == 3);
  for (size_t p = 0; p < 3; ++p) CHECK(back.programs[p].actions == f.plan.programs[p].actions);
  CHECK(mp::PlanToYaml(back) == yaml);
  v1["stages"][1]["actions"][0] = "0F0";
  YAML::Emitter bad;
  bad << v1;
  CHECK_THROWS_WITH_AS(mp::ParsePlan(bad.c_str(), "old.plan.yaml"),
                       doctest::Contains("stages[1].actions[0]: action 0F0 belongs to stage 0"), mp::InputError);
  // v1 had no place for two stages' actions on one device (v2 would not
  // read such a plan back): refused, naming both (found by the fuzzer).
  YAML::Node shared = YAML::Load(out.c_str());
  shared["stages"][1]["device"] = 0;
  YAML::Emitter two;
  two << shared;
  CHECK_THROWS_WITH_AS(mp::ParsePlan(two.c_str(), "old.plan.yaml"),
                       doctest::Contains("stages[1].device: device 0 already runs stages[0] (mpplan/v1 plans run one "
                                         "stage per device)"),
                       mp::InputError);
}

TEST_CASE("a plan round-trips through the reader exactly") {
  for (bool training : {true, false}) {
    PlanFixture f(3, training);
    // The predictions replay: the simulator gives the step time back.
    CHECK(mp::SimulatePlan(f.plan).step_ms == doctest::Approx(f.plan.predicted.step_ms).epsilon(1e-6));
    f.plan.profile.shared_slowdown = {1, 1.125, 1.5};  // CPU workers
    f.plan.profile.reference_ms = 0.8125;               // a measured profile's noise
    f.plan.profile.step_overhead_ms = 0.0625;           // mpexec's cost per step, in the replay
    f.plan.stages[1].transient_bytes = 4096;            // an op's working memory, once
    f.plan.stages[2].weight_gradient_bytes = 2048;      // what I keeps for W (zb-h1, zbv)
    f.plan.stages[2].forward_peak_bytes = 1024;         // the most its forward has live
    f.plan.stages[2].freed_by_i_bytes = 512;            // what I frees
    f.plan.stages[2].weight_transient_bytes = 0;        // W's own transient: 0 written, -1 (I's) not
    if (training) {                                     // recomputation: the forward again in B
      f.plan.stages[0].recompute = true;
      f.plan.stages[0].recomputed_bytes = 8192;
    }
    f.plan.predicted.step_low_ms = 0.96875 * f.plan.predicted.step_ms;
    f.plan.predicted.step_high_ms = 1.0625 * f.plan.predicted.step_ms;
    f.plan.alternatives.front().tie = true;
    REQUIRE(f.plan.stages.size() == 3);
    const std::string yaml = mp::PlanToYaml(f.plan);
    const mp::Plan back = mp::ParsePlan(yaml, "plan.yaml");
    CHECK(mp::PlanToYaml(back) == yaml);
    CHECK(back.stages.size() == 3);
    CHECK(back.microbatches == f.plan.microbatches);
    CHECK(back.schedule == f.plan.schedule);
    CHECK(back.model.sha256 == f.plan.model.sha256);
    for (size_t s = 0; s < back.stages.size(); ++s) {
      CHECK(back.stages[s].nodes == f.plan.stages[s].nodes);
      CHECK(back.stages[s].program == f.plan.stages[s].program);
      CHECK(back.stages[s].sends.size() == f.plan.stages[s].sends.size());
    }
    REQUIRE(back.programs.size() == f.plan.programs.size());
    for (size_t p = 0; p < back.programs.size(); ++p) {
      CHECK(back.programs[p].device == f.plan.programs[p].device);
      CHECK(back.programs[p].actions == f.plan.programs[p].actions);
    }
    CHECK(back.alternatives.size() == f.plan.alternatives.size());
    CHECK(back.profile.shared_slowdown == f.plan.profile.shared_slowdown);
    CHECK(back.profile.reference_ms == f.plan.profile.reference_ms);
    CHECK(back.profile.step_overhead_ms == f.plan.profile.step_overhead_ms);
    CHECK(back.stages[1].transient_bytes == 4096);
    CHECK(back.stages[2].weight_gradient_bytes == 2048);
    CHECK(back.stages[2].forward_peak_bytes == 1024);
    CHECK(back.stages[2].freed_by_i_bytes == 512);
    CHECK(back.stages[2].weight_transient_bytes == 0);
    CHECK(back.stages[1].weight_transient_bytes == -1);
    CHECK(back.stages[0].recompute == training);
    CHECK(back.stages[0].recomputed_bytes == (training ? 8192 : 0));
    CHECK(back.optimizer == (training ? "adam" : ""));  // what mpexec runs: mpplan --optimizer's default
    for (size_t s = 0; s < back.stages.size(); ++s) CHECK(back.stages[s].gradient_bytes == f.plan.stages[s].gradient_bytes);
    CHECK_FALSE(back.stages[1].recompute);
    CHECK(mp::SimulatePlan(back).step_ms ==
          doctest::Approx(mp::SimulatePlan(f.plan).step_ms).epsilon(1e-9));
    CHECK(back.predicted.step_low_ms == doctest::Approx(f.plan.predicted.step_low_ms));
    CHECK(back.predicted.step_high_ms == doctest::Approx(f.plan.predicted.step_high_ms));
    CHECK(back.alternatives.front().tie);
    mp::CheckPlanAgainstGraph(back, f.builder.graph, "plan.yaml");
    // ... with the contention the plan records, read back.
    const double slowed = mp::SimulatePlan(f.plan).step_ms;
    CHECK(slowed > f.plan.predicted.step_ms);
    CHECK(mp::SimulatePlan(back).step_ms == doctest::Approx(slowed).epsilon(1e-6));
  }
}

TEST_CASE("every node belongs to exactly one stage, as ranges") {
  const PlanFixture f;
  const std::vector<int> owner = mp::StageOfNode(f.plan);
  for (int stage : owner) CHECK(stage >= 0);
  CHECK(mp::ToRanges({5, 1, 2, 3, 7}) == std::vector<mp::NodeRange>{{1, 3}, {5, 5}, {7, 7}});
  CHECK(mp::FromRanges({{1, 3}, {7, 7}}) == std::vector<int>{1, 2, 3, 7});
}

TEST_CASE("the optimizer's step: each stage's from its trained bytes, in the step, and it round-trips") {
  mp::testing::PlanFixture f(2, true);
  f.cluster.optimizer_ms_per_mib = 0.5;
  f.cluster.optimizer_slowdown = {1, 1.25};  // 2 devices step at once
  const mp::SearchResult result = mp::SearchPlan(f.builder.graph, f.builder.profile, f.cluster, f.request);
  mp::PlanSource source;
  source.model_path = "chain.pt";
  source.model_sha256 = std::string(64, 'a');
  for (int i = 0; i < 3; ++i) source.devices.push_back(mp::PlanDevice{i, "cpu", i, "dev", int64_t(1) << 30, 1.0});
  const mp::Plan p = mp::BuildPlan(f.builder.graph, f.builder.profile, f.cluster, f.request, result, source);
  double most = 0;
  for (const mp::PlanStage& s : p.stages) {
    CHECK(s.optimizer_ms == doctest::Approx(0.5 * 1.25 * double(s.gradient_bytes) / (1 << 20)));
    most = std::max(most, s.optimizer_ms);
  }
  CHECK(p.predicted.optimizer_ms == doctest::Approx(most));
  CHECK(most > 0);
  CHECK(p.predicted.step_ms > f.plan.predicted.step_ms);  // the fixture's: no optimizer rate
  const std::string yaml = mp::PlanToYaml(p);
  const mp::Plan back = mp::ParsePlan(yaml, "plan.yaml");
  CHECK(mp::PlanToYaml(back) == yaml);
  CHECK(back.predicted.optimizer_ms == p.predicted.optimizer_ms);
  CHECK(mp::SimulatePlan(back).step_ms == doctest::Approx(p.predicted.step_ms).epsilon(1e-6));
  CHECK(mp::PlanToYaml(f.plan).find("optimizer_ms") == std::string::npos);  // none charged: none written
  CheckError(Mutated(yaml, [](YAML::Node& r) { r["stages"][0]["predicted"]["optimizer_ms"] = -1; }),
             "stages[0].predicted.optimizer_ms");
  CheckError(Mutated(yaml, [](YAML::Node& r) { r["predicted"]["optimizer_ms"] = "soon"; }),
             "predicted.optimizer_ms");
  const std::string inference = mp::PlanToYaml(PlanFixture(2, false).plan);
  CheckError(Mutated(inference, [](YAML::Node& r) { r["predicted"]["optimizer_ms"] = 1; }),
             "predicted.optimizer_ms: only a training plan steps an optimizer");
}

TEST_CASE("a plan with replicas: each runs its share, the step includes its all-reduce, and it round-trips") {
  const PlanFixture one(2, true);
  const PlanFixture two(2, true, int64_t(1) << 30, 2);
  const mp::Plan& p = two.plan;
  CHECK(p.replicas == 2);
  CHECK(p.batch == 8);
  CHECK(p.microbatch_size == mp::MicrobatchSize(4, p.microbatches));  // 4 samples a replica
  CHECK(p.devices.size() == 6);
  REQUIRE(p.stages.size() == 2);
  double slowest = 0;
  for (const mp::PlanStage& s : p.stages) {
    CHECK(s.replica_devices == std::vector<int>{s.device, s.device + 3});
    CHECK(s.allreduce_ms > 0);  // test_search checks the formula
    slowest = std::max(slowest, s.allreduce_ms);
  }
  CHECK(p.predicted.allreduce_ms == slowest);
  CHECK(slowest > 0);
  // Half the batch a step, plus the all-reduce: between the two bounds.
  CHECK(p.predicted.step_ms > slowest);
  CHECK(p.predicted.samples_per_s == doctest::Approx(8 * 1000.0 / p.predicted.step_ms));
  CHECK(one.plan.replicas == 1);
  CHECK(one.plan.stages.front().allreduce_ms == 0);
  const std::string yaml = mp::PlanToYaml(p);
  CHECK(yaml.find("\nreplicas: 2\n") != std::string::npos);
  CHECK(mp::PlanToYaml(one.plan).find("replica") == std::string::npos);  // a plain plan stays as it was
  const mp::Plan back = mp::ParsePlan(yaml, "plan.yaml");
  CHECK(mp::PlanToYaml(back) == yaml);
  CHECK(back.replica_link.bandwidth_bytes_per_s == 1e8);
  CHECK(mp::SimulatePlan(back).step_ms == doctest::Approx(p.predicted.step_ms).epsilon(1e-6));
  // The replicas' wait, a share of the step, kept and simulated again.
  const std::string waiting = Mutated(yaml, [](YAML::Node& r) { r["profile"]["replica_wait_share"] = 0.125; });
  const mp::Plan waited = mp::ParsePlan(waiting, "plan.yaml");
  CHECK(waited.profile.replica_wait_share == 0.125);
  CHECK(mp::PlanToYaml(mp::ParsePlan(mp::PlanToYaml(waited), "plan.yaml")) == mp::PlanToYaml(waited));
  const double step_overhead = p.profile.step_overhead_ms;
  CHECK(mp::SimulatePlan(waited).step_ms ==
        doctest::Approx((p.predicted.step_ms - step_overhead) * 1.125 + step_overhead).epsilon(1e-6));
  CheckError(Mutated(yaml, [](YAML::Node& r) { r["profile"]["replica_wait_share"] = 1.5; }),
             "profile.replica_wait_share: expected a share of the step >= 0 and <= 1, found 1.5");

  CheckError(Mutated(yaml, [](YAML::Node& r) { r["replicas"] = 3; }), "replicas: batch 8 does not split evenly into 3");
  CheckError(Mutated(yaml, [](YAML::Node& r) { r["stages"][1]["replica_devices"][1] = 9; }),
             "stages[1].replica_devices[1]: device 9 is out of range (the plan has 6 devices)");
  CheckError(Mutated(yaml, [](YAML::Node& r) { r["stages"][0]["replica_devices"].push_back(4); }),
             "stages[0].replica_devices");
  CheckError(Mutated(yaml, [](YAML::Node& r) { r["stages"][1]["replica_devices"][1] = 1; }),
             "stages[1].replica_devices[1]: device 1 already runs another replica of this stage");
  CheckError(Mutated(yaml, [](YAML::Node& r) { r["stages"][0]["predicted"]["allreduce_ms"] = -1; }),
             "stages[0].predicted.allreduce_ms: expected a time of 0 ms or more");
  const std::string plain = mp::PlanToYaml(one.plan);
  CheckError(Mutated(plain, [](YAML::Node& r) { r["replica_link"]["latency_ms"] = 1; }),
             "replica_link: only a plan with replicas");
  CheckError(Mutated(plain, [](YAML::Node& r) { r["stages"][0]["predicted"]["allreduce_ms"] = 1; }),
             "stages[0].predicted.allreduce_ms: only a plan with replicas");
  CheckError(Mutated(plain, [](YAML::Node& r) { r["predicted"]["allreduce_ms"] = 1; }),
             "predicted.allreduce_ms: only a plan with replicas");
  CheckError(Mutated(plain, [](YAML::Node& r) { r["profile"]["replica_wait_share"] = 0.1; }),
             "profile.replica_wait_share: only a plan with replicas waits for them");
  CheckError(Mutated(yaml,
                     [](YAML::Node& r) {
                       r.remove("replicas");
                       r.remove("replica_link");
                       r["microbatch_size"] = 2;  // 8 samples in 4, without replicas
                     }),
             "stages[0].replica_devices: only a plan with replicas");
}

TEST_CASE("validation errors name the key path") {
  const PlanFixture f;
  const std::string yaml = mp::PlanToYaml(f.plan);
  REQUIRE(ErrorOf(yaml).empty());
  const int last = f.plan.model.nodes - 1;

  SUBCASE("not YAML") { CHECK(ErrorOf("format: [mpplan").find("not valid YAML") != std::string::npos); }
  SUBCASE("unknown format version") {
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["format"] = "mpplan/v9"; }), "format: unknown format 'mpplan/v9'");
  }
  SUBCASE("a slowdown factor below 1") {
    CheckError(Mutated(yaml,
                       [](YAML::Node& r) {
                         r["profile"]["shared_slowdown"].push_back(1);
                         r["profile"]["shared_slowdown"].push_back(0.5);
                       }),
               "profile.shared_slowdown[1]: expected a slowdown factor >= 1, found 0.5");
  }
  SUBCASE("a band that does not hold the prediction") {
    CheckError(Mutated(yaml,
                       [](YAML::Node& r) {
                         r["predicted"]["step_band_ms"].push_back(1e9);
                         r["predicted"]["step_band_ms"].push_back(2e9);
                       }),
               "predicted.step_band_ms: expected [low, high] around step_ms");
  }
  SUBCASE("memory figures: bytes and tensor counts are never negative") {
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["stages"][0]["predicted"]["transient_bytes"] = -1; }),
               "stages[0].predicted.transient_bytes: expected bytes of 0 or more, found -1");
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["stages"][0]["predicted"]["weight_transient_bytes"] = -2; }),
               "stages[0].predicted.weight_transient_bytes: expected bytes of 0 or more, found -2");
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["stages"][1]["predicted"]["static_bytes"] = -8; }),
               "stages[1].predicted.static_bytes: expected bytes of 0 or more, found -8");
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["optimizer_state_factor"] = -2; }),
               "optimizer_state_factor: expected a tensor count >= 0, found -2");
  }
  SUBCASE("optimizer: one mpexec runs, holding the state the plan's memory counts") {
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["optimizer"] = "lamb"; }),
               "optimizer: unknown optimizer 'lamb' (expected sgd, momentum, adam or adamw)");
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["optimizer"] = "momentum"; }),
               "optimizer: momentum keeps 1 state tensor(s) per parameter, but optimizer_state_factor is 2");
    const mp::Plan adamw = mp::ParsePlan(Mutated(yaml, [](YAML::Node& r) { r["optimizer"] = "adamw"; }), "a.yaml");
    CHECK(adamw.optimizer == "adamw");
    const mp::Plan old = mp::ParsePlan(Mutated(yaml, [](YAML::Node& r) { r.remove("optimizer"); }), "old.yaml");
    CHECK(old.optimizer.empty());  // mpexec goes by optimizer_state_factor (optimizer.h)
  }
  SUBCASE("gradients: no more than static_bytes holds with their optimizer state, none in inference") {
    const int64_t held = f.plan.stages[1].static_bytes;
    CheckError(Mutated(yaml, [&](YAML::Node& r) { r["stages"][1]["predicted"]["gradient_bytes"] = held; }),
               "stages[1].predicted.gradient_bytes: more than static_bytes (" + std::to_string(held) +
                   ") holds with 2 optimizer tensors each");
    const PlanFixture infer(3, false);
    CheckError(Mutated(mp::PlanToYaml(infer.plan),
                       [](YAML::Node& r) { r["stages"][0]["predicted"]["gradient_bytes"] = 0; }),
               "stages[0].predicted.gradient_bytes: only a training plan holds gradients");
    // A plan written before frozen parameters were told apart: every parameter has one.
    const mp::Plan old = mp::ParsePlan(
        Mutated(yaml, [](YAML::Node& r) { r["stages"][1]["predicted"].remove("gradient_bytes"); }), "old.yaml");
    CHECK(old.stages[1].gradient_bytes > 0);
    CHECK(old.stages[1].gradient_bytes == f.plan.stages[1].gradient_bytes);
  }
  SUBCASE("recomputation: only in training, never with zb-h1 or zbv") {
    const PlanFixture infer(3, false);
    CheckError(Mutated(mp::PlanToYaml(infer.plan), [](YAML::Node& r) { r["stages"][1]["recompute"] = true; }),
               "stages[1].recompute: inference keeps no activations to recompute");
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["stages"][0]["predicted"]["recomputed_bytes"] = -4; }),
               "stages[0].predicted.recomputed_bytes: expected bytes of 0 or more, found -4");
  }
  SUBCASE("unknown key at the top") {
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["colour"] = 1; }), "colour: unknown key");
  }
  SUBCASE("a kept baseline cut: only in a dp plan, and a baseline's, and the objective") {
    const std::string kept = Mutated(yaml, [](YAML::Node& r) { r["cut"] = "block"; });
    CHECK(mp::ParsePlan(kept, "kept.plan.yaml").cut == "block");
    CHECK(mp::PlanToYaml(mp::ParsePlan(kept, "kept.plan.yaml")).find("\ncut: block\n") != std::string::npos);
    const std::string moved = Mutated(yaml, [](YAML::Node& r) { r["cut"] = "block+neighbour"; });
    CHECK(mp::ParsePlan(moved, "moved.plan.yaml").cut == "block+neighbour");
    CHECK(mp::ParsePlan(Mutated(yaml, [](YAML::Node& r) { r["cut"] = "neighbour"; }), "n.plan.yaml").cut == "neighbour");
    const std::string paid = Mutated(yaml, [](YAML::Node& r) { r["objective"] = "throughput-per-device"; });
    CHECK(mp::ParsePlan(paid, "paid.plan.yaml").objective == mp::Objective::kThroughputPerDevice);
    CHECK(mp::PlanToYaml(mp::ParsePlan(paid, "paid.plan.yaml")).find("\nobjective: throughput-per-device\n") !=
          std::string::npos);
    CHECK(mp::PlanToYaml(mp::ParsePlan(yaml, "plan.yaml")).find("objective") == std::string::npos);  // step: unsaid
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["objective"] = "cost"; }),
               "objective: unknown objective 'cost' (expected step or throughput-per-device)");
    for (const char* bad : {"dp", "block+dp", "neighbour+neighbour", "+neighbour"}) {
      CAPTURE(bad);
      CheckError(Mutated(yaml, [&](YAML::Node& r) { r["cut"] = bad; }),
                 std::string("cut: unknown cut '") + bad +
                     "' (expected uniform, params, block, neighbour, or a baseline's +neighbour)");
    }
    CheckError(Mutated(yaml,
                       [](YAML::Node& r) {
                         r["partitioner"] = "uniform";
                         r["cut"] = "block";
                       }),
               "cut: only a plan of partitioner dp keeps another partitioner's cut");
  }
  SUBCASE("device peaks: one per program, in bytes") {
    REQUIRE(f.plan.predicted.device_peak_memory_bytes.size() == f.plan.programs.size());
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["predicted"]["device_peak_memory_bytes"].push_back(1); }),
               "predicted.device_peak_memory_bytes: expected one peak per program (3), found 4");
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["predicted"]["device_peak_memory_bytes"][0] = -5; }),
               "predicted.device_peak_memory_bytes[0]: expected bytes of 0 or more, found -5");
  }
  SUBCASE("unknown key in a stage") {
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["stages"][1]["devise"] = 0; }), "stages[1].devise: unknown key");
  }
  SUBCASE("wrong type") {
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["stages"][1]["device"] = "one"; }),
               "stages[1].device: expected an integer, found 'one'");
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["batch"] = "8.5"; }), "batch: expected an integer, found '8.5'");
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["stages"][0]["nodes"] = "all"; }),
               "stages[0].nodes: expected a list, found 'all'");
  }
  SUBCASE("missing fields") {
    CheckError(Mutated(yaml, [](YAML::Node& r) { r.remove("programs"); }), "top level: missing key 'programs'");
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["stages"][0]["actions"] = YAML::Load("[0F0]"); }),
               "stages[0].actions: unknown key");  // v1's place for them
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["model"].remove("sha256"); }), "model: missing key 'sha256'");
    CheckError(Mutated(yaml, [](YAML::Node& r) { r.remove("microbatches"); }), "top level: missing key 'microbatches'");
  }
  SUBCASE("node ids out of range") {
    CheckError(Mutated(yaml, [&](YAML::Node& r) { r["stages"][2]["nodes"][0][1] = last + 5; }),
               mp::Concat("stages[2].nodes[0]: node ", last + 5, " is out of range (the graph has ", last + 1, " nodes)"));
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["stages"][0]["nodes"][0][0] = -1; }),
               "stages[0].nodes[0]: node -1 is out of range");
  }
  SUBCASE("a node in two stages") {
    const int last0 = f.plan.stages[0].nodes.back().second;
    CheckError(Mutated(yaml, [&](YAML::Node& r) { r["stages"][1]["nodes"][0][0] = last0; }),
               mp::Concat("stages[1].nodes[0]: node ", last0, " is already in stage 0"));
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["stages"][1]["nodes"].push_back(YAML::Load("[0, 0]")); }),
               "stages[1].nodes[1]: ranges must ascend and not touch");
  }
  SUBCASE("a node in no stage") {
    const mp::NodeRange first = f.plan.stages[0].nodes[0];
    CheckError(Mutated(yaml, [&](YAML::Node& r) { r["stages"][0]["nodes"][0][0] = first.first + 1; }),
               mp::Concat("stages: node ", first.first, " is in no stage"));
  }
  SUBCASE("a stage reading from a later stage") {
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["stages"][0]["receives"].push_back(YAML::Load("{value: v3, from: 2}")); }),
               "stages[0].receives[0].from: stage 0 reads 'v3' from stage 2, which is not an earlier stage");
  }
  SUBCASE("duplicate keys and numbers beyond 32 bits") {
    CheckError(yaml + "microbatches: 1\n", "microbatches: duplicate key");
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["stages"][0]["device"] = int64_t(1) << 32; }),
               "stages[0].device: device 4294967296 is out of range");
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["microbatches"] = (int64_t(1) << 32) + 8; }),
               "microbatches: expected 1 to the batch (8), found 4294967304");
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["model"]["nodes"] = 2000000000; }),
               "model.nodes: 2000000000 is out of range");
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["stages"][1]["device"] = "a\nb"; }),
               "stages[1].device: expected an integer, found 'a\\nb'");
  }
  SUBCASE("micro-batches that leave the last one empty") {
    // 8 in 7 micro-batches of 2 would need 2+2+2+2+0+0+0.
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["microbatches"] = 7; r.remove("microbatch_size"); }),
               "microbatches: 7 micro-batches of 2 samples leave the last of batch 8 empty");
  }
  SUBCASE("transfers skip a stage") {
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["stages"][2]["receives"][0]["from"] = 0; }),
               "stages[2].receives[0].from: tensors move between neighbouring stages only");
  }
  SUBCASE("devices out of range") {
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["stages"][1]["device"] = 7; }),
               "stages[1].device: device 7 is out of range (the plan has 3 devices)");
  }
  SUBCASE("a memory headroom that is not a fraction") {
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["devices"][1]["memory_headroom"] = 5; }),
               "devices[1].memory_headroom: expected a fraction in [0, 1)");
  }
  SUBCASE("micro-batch count out of range") {
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["microbatches"] = 0; }),
               "microbatches: expected 1 to the batch (8), found 0");
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["microbatches"] = 9; }),
               "microbatches: expected 1 to the batch (8), found 9");
  }
  SUBCASE("stage ids out of order") {
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["stages"][1]["id"] = 2; }),
               "stages[1].id: stage ids must count up from 0: expected 1, found 2");
  }
  SUBCASE("actions") {
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["programs"][0]["actions"][1] = "0X3"; }),
               "programs[0].actions[1]: ");
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["programs"][0]["actions"][0] = "1F0"; }),
               "programs[0].actions[0]: action 1F0 belongs to stage 1, which runs on device 1");
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["programs"][0]["actions"][0] = "7F0"; }),
               "programs[0].actions[0]: action 7F0 names stage 7 (the plan has 3)");
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["programs"][2]["actions"] = YAML::Load("[]"); }),
               "programs[2].actions: stage 2: expected 8 forwards and 8 backwards (one per micro-batch), found 0 and 0");
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["programs"][1]["device"] = 0; }),
               "programs[1].device: device 0 already runs programs[0]");
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["programs"].remove(2); }),
               "stages[2].device: device 2 has no program in programs");
    // Stage 1 computes micro-batch 0 without receiving it first.
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["programs"][1]["actions"][0] = "1F0"; r["programs"][1]["actions"][1] = "1RECV_F0"; }),
               "programs: the action lists cannot run: schedule device 1 step 0: 1F0 comes before 1RECV_F0");
  }
  SUBCASE("schedule and mode") {
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["schedule"] = "zigzag"; }), "schedule: unknown schedule 'zigzag'");
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["mode"] = "infer"; }), "schedule: schedule ");
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["mode"] = "training"; }), "mode: unknown mode 'training'");
  }
  SUBCASE("inputs") {
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["inputs"][0]["dtype"] = "float33"; }),
               "inputs[0].dtype: unknown dtype 'float33'");
    CheckError(Mutated(yaml, [](YAML::Node& r) { r["inputs"][0]["shape"][0] = 4; }),
               "inputs[0].shape: the batch dimension must be the plan's batch, 8");
  }
}

TEST_CASE("the plan is checked against the model's graph") {
  const PlanFixture f;
  mp::OpGraph graph = f.builder.graph;
  mp::CheckPlanAgainstGraph(f.plan, graph, "plan.yaml");

  graph.fingerprint = "fedcba9876543210";
  CHECK_THROWS_WITH_AS(mp::CheckPlanAgainstGraph(f.plan, graph, "plan.yaml"),
                       doctest::Contains("model.graph_fingerprint: the plan was made for graph 0123456789abcdef"),
                       mp::InputError);

  // Swap the first and last stages' nodes: stage 0 now reads from stage 2.
  mp::Plan swapped = f.plan;
  std::swap(swapped.stages[0].nodes, swapped.stages[2].nodes);
  CHECK_THROWS_WITH_AS(mp::CheckPlanAgainstGraph(swapped, f.builder.graph, "plan.yaml"),
                       doctest::Contains("a later stage"), mp::InputError);
}
