// The benchmark runner in its smoke mode (tiny sizes, one turn): every
// section runs against the real binaries, the Pipe peer and the zoo, and
// leaves the files docs/BENCHMARKS.md is made from: results.json, a CSV per
// section, SVG plots, and the summary table printed last.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "../run_tool.h"

namespace fs = std::filesystem;

namespace {

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

size_t Lines(const std::string& text) { return size_t(std::count(text.begin(), text.end(), '\n')); }

// The rows of `section` whose `key` is `value`.
std::vector<nlohmann::json> RowsWhere(const nlohmann::json& section, const std::string& key, const std::string& value) {
  std::vector<nlohmann::json> out;
  for (const auto& row : section.at("rows")) {
    if (row.at(key).get<std::string>() == value) out.push_back(row);
  }
  return out;
}

}  // namespace

TEST_CASE("bench_suite --smoke runs every comparison and writes tables, plots and the summary") {
  const fs::path out = fs::path(MP_TEST_TMP) / "bench_suite_smoke";
  fs::remove_all(out);
  const auto run = mp::test::RunTool(MP_BENCH_SUITE, std::string(MP_MODELS_DIR) + " " + out.string() + " --smoke");
  INFO(run.out);
  REQUIRE(run.status == 0);

  // The summary table comes last, and it is also written down.
  const std::string table = ReadAll(out / "summary.md");
  REQUIRE(!table.empty());
  CHECK(run.out.size() >= table.size());
  CHECK(run.out.substr(run.out.size() - table.size()) == table);
  CHECK(table.rfind("| what", 0) == 0);

  const auto results = nlohmann::json::parse(ReadAll(out / "results.json"));
  CHECK(results.at("smoke") == true);
  const auto& sections = results.at("sections");
  for (const char* name :
       {"tutorial_resnet50", "tutorial_convnet", "peers", "partitioners", "fidelity", "planner_speed"}) {
    INFO(name);
    REQUIRE(sections.contains(name));
    const auto& rows = sections.at(name).at("rows");
    CHECK(rows.size() > 0);
    CHECK(Lines(ReadAll(out / (std::string(name) + ".csv"))) == rows.size() + 1);
  }

  {  // the tutorial's ResNet-50: one device, the hand split, its split sizes and mpplan's plan
    const auto& t = sections.at("tutorial_resnet50");
    REQUIRE(t.at("rows").size() == 5);  // one device, hand split, split sizes 2 and 4, mpplan
    const auto one = RowsWhere(t, "case", "one device");
    REQUIRE(one.size() == 1);
    CHECK(one[0].at("stages") == 1);
    const auto hand = RowsWhere(t, "case", "hand split, no micro-batches");
    REQUIRE(hand.size() == 1);
    CHECK(hand[0].at("stages") == 2);
    CHECK(hand[0].at("microbatches") == 1);
    CHECK(hand[0].at("partitioner") == "layers");
    for (int split : {2, 4}) {
      const auto rows = RowsWhere(t, "case", "hand split, split size " + std::to_string(split));
      REQUIRE(rows.size() == 1);
      CHECK(rows[0].at("microbatch_size") == split);
      CHECK(rows[0].at("microbatches") == 8 / split);
      CHECK(rows[0].at("schedule") == "gpipe");
    }
    for (const auto& row : t.at("rows")) {
      CHECK(row.at("measured_ms").get<double>() > 0);
      CHECK(row.at("predicted_ms").get<double>() > 0);
    }
    const std::string svg = ReadAll(out / "tutorial_resnet50.svg");
    CHECK(svg.rfind("<svg", 0) == 0);
    CHECK(svg.find("hand split, measured") != std::string::npos);
    CHECK(svg.find("hand split, predicted") != std::string::npos);
    CHECK(svg.find("mpplan: ") != std::string::npos);  // the chosen split, marked
  }

  {  // the 4-device ConvNet: one device, the tutorial's 4 stages, 4 devices forced, mpplan's choice
    const auto& rows = sections.at("tutorial_convnet").at("rows");
    REQUIRE(rows.size() == 4);
    CHECK(rows[0].at("stages") == 1);
    CHECK(rows[1].at("stages") == 4);
    CHECK(rows[1].at("microbatches") == 2);  // batch 16, split size 8
    // --stages 4 fixes the devices: auto may give each of them 2 stages
    // (interleaved-1f1b or zbv), 8 in all.
    CHECK(rows[2].at("devices") == 4);
    CHECK((rows[2].at("stages") == 4 || rows[2].at("stages") == 8));
    CHECK(rows[3].at("devices").get<int>() <= 4);  // its stages may be more: 2 per device, interleaved
    CHECK(rows[3].at("stages").get<int>() >= rows[3].at("devices").get<int>());
  }

  {  // peers: mpexec, Pipe and eager PyTorch on the same model
    const auto& rows = sections.at("peers").at("rows");
    REQUIRE(rows.size() == 3);
    CHECK(rows[0].at("runtime").get<std::string>().rfind("mpexec", 0) == 0);
    CHECK(rows[1].at("runtime").get<std::string>().rfind("Pipe, 2 partitions [", 0) == 0);
    CHECK(rows[2].at("runtime").get<std::string>().rfind("eager PyTorch", 0) == 0);
    for (const auto& row : rows) CHECK(row.at("samples_per_s").get<double>() > 0);
  }

  {  // partitioners: the four methods at the DP plan's micro-batches, per model
    const auto& section = sections.at("partitioners");
    for (const char* model : {"mlp", "convnet"}) {
      const auto rows = RowsWhere(section, "model", model);
      REQUIRE(rows.size() == 4);
      std::set<std::string> methods;
      for (const auto& row : rows) {
        methods.insert(row.at("partitioner").get<std::string>());
        // The chosen plan's stages: 2, or 4 where it interleaves 2 per device.
        CHECK(row.at("stages") == rows[0].at("stages"));
        CHECK(row.at("microbatches") == rows[0].at("microbatches"));
      }
      CHECK(methods == std::set<std::string>{"dp", "block", "params", "uniform"});
      CHECK(rows[0].at("measured_vs_dp") == 1.0);
    }
  }

  {  // fidelity: 1 and 2 stages per model, with the error
    for (const char* model : {"mlp", "convnet"}) {
      const auto rows = RowsWhere(sections.at("fidelity"), "model", model);
      REQUIRE(rows.size() == 2);
      CHECK(rows[0].at("stages") == 1);
      // 2 devices: 2 stages, or 4 where the search interleaves.
      CHECK((rows[1].at("stages") == 2 || rows[1].at("stages") == 4));
      const double expected =
          100 * (rows[1].at("measured_ms").get<double>() / rows[1].at("predicted_ms").get<double>() - 1);
      CHECK(rows[1].at("error_pct").get<double>() == doctest::Approx(expected));
    }
  }

  {  // planner speed: zoo models and synthetic graphs into 8 and 64 stages
    const auto& rows = sections.at("planner_speed").at("rows");
    std::set<std::pair<std::string, int>> synthetic;
    for (const auto& row : rows) {
      CHECK(row.at("partition_ms").get<double>() > 0);
      if (row.at("stages").is_number())
        synthetic.insert({row.at("graph").get<std::string>(), row.at("stages").get<int>()});
    }
    CHECK(synthetic == std::set<std::pair<std::string, int>>{{"chain of 1000 nodes", 8},
                                                             {"chain of 1000 nodes", 64},
                                                             {"branchy DAG of 1000 nodes", 8},
                                                             {"branchy DAG of 1000 nodes", 64}});
  }
}

TEST_CASE("bench_suite refuses an unknown section in one line") {
  const auto run = mp::test::RunTool(
      MP_BENCH_SUITE, std::string(MP_MODELS_DIR) + " " + MP_TEST_TMP + "/bench_suite_bad --only fidelity,nope");
  CHECK(run.status == 2);
  CHECK(run.out == "bench_suite: --only: unknown section 'nope'\n");
}
