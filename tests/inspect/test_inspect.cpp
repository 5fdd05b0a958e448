// `mpplan --inspect`: the summary, its JSON, its errors, and the binary.
#include "tests/doctest_torch.h"

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "planner/inspect/inspect.h"
#include "../graph/zoo.h"
#include "../run_tool.h"

using mp::test::ZooPath;

namespace {

mp::test::ToolRun RunMpplan(const std::string& args) { return mp::test::RunTool(MP_MPPLAN, args); }

}  // namespace

TEST_CASE("ResNet-50 summary") {
  auto s = mp::InspectModel(ZooPath("resnet50.script.pt"), {"float32[2,3,128,128]"});
  CHECK(s.params == 267);  // 53 convs, 53 x 4 batch-norm tensors, fc weight and bias
  CHECK(s.param_elements == 25557032 + 53120);  // parameters + running stats
  CHECK(s.param_bytes == s.param_elements * 4);
  CHECK(s.input_source == "--input");
  CHECK(s.kinds.at("aten::conv2d") == 53);
  std::vector<std::string> names;
  for (const auto& l : s.layers) names.push_back(l.name);
  for (const char* want : {"conv1", "bn1", "layer1", "layer2", "layer3", "layer4", "fc"}) {
    CHECK(std::find(names.begin(), names.end(), want) != names.end());
  }
  int nodes = 0;
  for (const auto& l : s.layers) nodes += l.nodes;
  CHECK(nodes == s.nodes);
}

TEST_CASE("mpplan --inspect --json prints one object with the documented keys") {
  auto run = RunMpplan(ZooPath("gpt.script.pt") + " --inspect --json");
  REQUIRE(run.status == 0);
  auto doc = nlohmann::json::parse(run.out);
  for (const char* key : {"nodes", "params", "param_bytes", "fingerprint", "inputs", "layers"}) {
    CHECK(doc.contains(key));
  }
  CHECK(doc["inputs"][0]["dtype"] == "int64");
  CHECK(doc["inputs"][0]["range"][1] == 1024);
  // The same fingerprint in this process and in another one.
  auto here = mp::InspectModel(ZooPath("gpt.script.pt"), {});
  CHECK(doc["fingerprint"] == here.fingerprint);
  CHECK(doc["nodes"] == here.nodes);
  auto again = nlohmann::json::parse(RunMpplan(ZooPath("gpt.script.pt") + " --inspect --json").out);
  CHECK(again["fingerprint"] == doc["fingerprint"]);
}

TEST_CASE("--input overrides the embedded spec, one per model input") {
  auto s = mp::InspectModel(ZooPath("lstm.script.pt"),
                            {"float32[2,5,8]", "float32[2,2,32]", "float32[2,2,32]"});
  CHECK((s.inputs[0].shape == std::vector<int64_t>{2, 5, 8}));
  CHECK(s.inputs[1].name == "h0");
  CHECK_THROWS_WITH_AS(mp::InspectModel(ZooPath("lstm.script.pt"), {"float32[2,5,8]"}),
                       doctest::Contains("--input: the model takes 3 inputs (x, h0, c0), given 1"),
                       mp::InputError);
  CHECK_THROWS_WITH_AS(mp::InspectModel(ZooPath("toy.script.pt"), {"float32[4,7]"}),
                       doctest::Contains("the model rejects these inputs"), mp::InputError);
}

TEST_CASE("a model without an embedded spec needs --input, and says for which inputs") {
  torch::jit::Module m("Plain");
  m.register_parameter("w", torch::ones({4}), false);
  m.define(R"(
def forward(self, x, y):
    return x * self.w + y
)");
  const auto path = mp::test::TempPath("plain.pt");
  m.save(path);
  CHECK_THROWS_WITH_AS(mp::InspectModel(path, {}),
                       doctest::Contains("model carries no input spec; give one --input dtype[d0,...] "
                                         "per model input (x, y)"),
                       mp::InputError);
  auto s = mp::InspectModel(path, {"float32[4]", "float32[4]"});
  CHECK(s.params == 1);
  CHECK(s.param_bytes == 16);
}

TEST_CASE("mpplan errors are one line and a non-zero exit") {
  auto missing = RunMpplan("/nonexistent.pt --inspect");
  CHECK(missing.status == 1);
  CHECK(missing.out == "mpplan: /nonexistent.pt: no such file\n");
  auto bad_flag = RunMpplan(ZooPath("toy.script.pt") + " --inspect --input float32[4,x]");
  CHECK(bad_flag.status == 1);
  CHECK(bad_flag.out == "mpplan: --input 'float32[4,x]': dimension 'x' is not a positive integer\n");
  auto bad_mode = RunMpplan(ZooPath("toy.script.pt") + " --inspect --mode fly");
  CHECK(bad_mode.status != 0);
  CHECK(bad_mode.out.find("--mode") != std::string::npos);
}
