// `mpplan --profile-only`: JSON output, profile files in and out, and errors.
#include "tests/doctest_torch.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "../graph/zoo.h"
#include "../mpplan_in_process.h"
#include "../run_tool.h"
#include "planner/profile/profile_command.h"

using mp::test::TempPath;
using mp::test::ZooPath;

namespace {

mp::test::ToolRun Mpplan(const std::string& args) { return mp::test::MpplanInProcess(args); }

const std::string kQuick = " --profile-only --warmup 0 --repeats 1 --quiet";

}  // namespace

TEST_CASE("--json reports the profile's source and coverage") {
  auto run = Mpplan(ZooPath("mlp.script.pt") + kQuick + " --json --microbatch-sizes 2,16 --batch 16");
  REQUIRE(run.status == 0);
  const auto j = nlohmann::json::parse(run.out);
  CHECK(j["profile"]["source"] == "measured");
  CHECK(j["profile"]["coverage"].get<double>() > 0);
  CHECK(j["profile"]["microbatch_sizes"] == nlohmann::json::array({2, 16}));
  CHECK(j["profile"]["mode"] == "train");
  CHECK(j["profile"]["threads"].get<int>() >= 1);
}

TEST_CASE("--device-profile estimates without measuring") {
  auto run = Mpplan(ZooPath("gpt.script.pt") + kQuick + " --json --device-profile h100-sxm");
  REQUIRE(run.status == 0);
  const auto j = nlohmann::json::parse(run.out);
  CHECK(j["profile"]["source"] == "analytic");
  CHECK(j["profile"]["device"] == "H100-SXM");
  CHECK(j["profile"]["node_forward_ms"].back().get<double>() > 0);
  auto cross = Mpplan(ZooPath("gpt.script.pt") + kQuick + " --device-profile h100-sxm --calibrate");
  CHECK(cross.status == 1);
  CHECK(cross.out ==
        "mpplan: --calibrate measures here (cpu) to fit H100-SXM; that needs a device profile of the same type, "
        "not cuda\n");
  auto calibrated = Mpplan(ZooPath("mlp.script.pt") + kQuick + " --json --device-profile generic-cpu --calibrate");
  REQUIRE(calibrated.status == 0);
  CHECK(nlohmann::json::parse(calibrated.out)["profile"]["source"] == "calibrated");
}

TEST_CASE("an analytic profile counts the work inside an if: nn.TransformerEncoderLayer's, both paths") {
  // The zoo's BERT: 3 layers of width 64, 4 heads, feed-forward 128, at
  // batch 8 x 32 tokens. Each layer is one prim::If (PyTorch's fast path or
  // the slow one, chosen at run time), which the estimate took for one
  // elementwise op on its output: the 3 layers below a dropout. By hand,
  // a layer is 2 * 256 * (64 * 192 + 64 * 64 + 2 * 64 * 128) for its
  // products, 4 * 8 * 32 * 32 * 64 for attention's two: 18.9 MFLOP.
  for (const bool training : {true, false}) {
    CAPTURE(training);
    mp::ProfileRequest request;
    request.model_path = ZooPath("bert.script.pt");
    request.training = training;
    request.device_profile = "a100-80gb";
    request.progress = false;
    const mp::ProfiledModel profiled = mp::ProfileModel(request);
    const auto& sizes = profiled.profile.microbatch_sizes;
    REQUIRE(sizes.back() == 8);
    double encoder = 0;
    for (const auto& node : profiled.profile.nodes)
      if (profiled.graph.nodes[node.id].layer.rfind("encoder", 0) == 0) encoder += node.flops.back();
    CHECK(encoder == doctest::Approx(3 * 18.9e6).epsilon(0.1));
  }
}

TEST_CASE("a profile written with --profile-out is reused by --profile-in, and refused elsewhere") {
  const std::string file = TempPath("toy.profile.yaml");
  std::filesystem::remove(file);
  auto write = Mpplan(ZooPath("toy.script.pt") + kQuick + " --json --profile-out " + file);
  REQUIRE(write.status == 0);
  REQUIRE(std::filesystem::exists(file));
  auto read = Mpplan(ZooPath("toy.script.pt") + kQuick + " --json --profile-in " + file);
  REQUIRE(read.status == 0);
  CHECK(nlohmann::json::parse(read.out)["profile"]["node_forward_ms"] ==
        nlohmann::json::parse(write.out)["profile"]["node_forward_ms"]);
  auto other_batch = Mpplan(ZooPath("toy.script.pt") + kQuick + " --batch 4 --profile-in " + file);
  CHECK(other_batch.status == 1);
  CHECK(other_batch.out == "mpplan: --batch 4: " + file +
                               " was profiled at batch 20 (inputs float32[20,10]); leave --batch out, or profile "
                               "again without --profile-in\n");
  auto other_model = Mpplan(ZooPath("mlp.script.pt") + kQuick + " --profile-in " + file);
  CHECK(other_model.status == 1);
  CHECK(other_model.out.find(file + ": profile of a different graph") != std::string::npos);
  auto other_mode = Mpplan(ZooPath("toy.script.pt") + kQuick + " --mode infer --profile-in " + file);
  CHECK(other_mode.status == 1);
  CHECK(other_mode.out == "mpplan: " + file + ": profile is for training, the plan is for inference\n");
}

TEST_CASE("outputs never overwrite the model, and bad flags are one line") {
  const std::string model = TempPath("toy-copy.pt");
  std::filesystem::copy_file(ZooPath("toy.script.pt"), model, std::filesystem::copy_options::overwrite_existing);
  const auto size = std::filesystem::file_size(model);
  auto over = Mpplan(model + kQuick + " --profile-out " + model);
  CHECK(over.status == 1);
  CHECK(over.out == "mpplan: " + model + ": refusing to overwrite a file this command reads\n");
  CHECK(std::filesystem::file_size(model) == size);
  auto no_dir = Mpplan(ZooPath("toy.script.pt") + kQuick + " --profile-out /nonexistent/dir/p.yaml");
  CHECK(no_dir.status == 1);
  CHECK(no_dir.out == "mpplan: /nonexistent/dir/p.yaml: directory /nonexistent/dir does not exist\n");
  auto sizes = Mpplan(ZooPath("toy.script.pt") + kQuick + " --microbatch-sizes 0,4");
  CHECK(sizes.status == 1);
  CHECK(sizes.out == "mpplan: micro-batch sizes must lie in [1, 20] (the batch); got 0..4\n");
  auto unknown = Mpplan(ZooPath("toy.script.pt") + kQuick + " --device-profile tpu");
  CHECK(unknown.status == 1);
  CHECK(unknown.out.rfind("mpplan: unknown device profile 'tpu' (known: ", 0) == 0);
  auto threads = Mpplan(ZooPath("toy.script.pt") + kQuick + " --threads -2");
  CHECK(threads.status == 1);
  CHECK(threads.out == "mpplan: --threads must be at least 1, got -2\n");
}

TEST_CASE("--profile-only says which default size the model fails at and was left out") {
  const std::string model = ZooPath("heldout/simclr.script.pt");  // BatchNorm1d after pooling
  const auto text = Mpplan(model + " --profile-only --warmup 0 --repeats 1");
  REQUIRE(text.status == 0);
  CHECK(text.out.find("micro-batch size 1 left out: the model fails there (builtins.ValueError: Expected more than 1 "
                      "value per channel when training") != std::string::npos);
  const auto json = Mpplan(model + " --profile-only --warmup 0 --repeats 1 --json");
  REQUIRE(json.status == 0);
  const auto profile = nlohmann::json::parse(json.out)["profile"];
  CHECK(profile["microbatch_sizes"] == nlohmann::json::array({2, 4, 8}));
  CHECK(profile["sizes_left_out"].at(0)["size"] == 1);
  // In inference BatchNorm uses its running statistics: nothing is left out.
  const auto infer = Mpplan(model + " --profile-only --warmup 0 --repeats 1 --json --mode infer");
  REQUIRE(infer.status == 0);
  CHECK(nlohmann::json::parse(infer.out)["profile"]["sizes_left_out"].empty());
}
