// LoadModelFile: every way a model file can be wrong gets a clear InputError.
#include "tests/doctest_torch.h"

#include <fstream>

#include "common/error.h"
#include "planner/graph/model_file.h"
#include "zoo.h"

using mp::InputError;
using mp::test::TempPath;
using mp::test::ZooPath;

namespace {

std::string WriteFile(const std::string& name, const std::string& bytes) {
  const auto path = TempPath(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

}  // namespace

TEST_CASE("a zoo model loads with its embedded input spec") {
  auto model = mp::LoadModelFile(ZooPath("resnet50.script.pt"));
  REQUIRE(model.input_spec.size() == 1);
  CHECK((model.input_spec[0].shape == std::vector<int64_t>{120, 3, 128, 128}));
  auto gpt = mp::LoadModelFile(ZooPath("gpt.trace.pt"));
  REQUIRE(gpt.input_spec.size() == 1);
  CHECK(gpt.input_spec[0].dtype == "int64");
  CHECK(gpt.input_spec[0].has_range);
}

TEST_CASE("missing, empty, directory, not a zip") {
  CHECK_THROWS_WITH_AS(mp::LoadModelFile("/nonexistent/model.pt"),
                       "/nonexistent/model.pt: no such file", InputError);
  CHECK_THROWS_WITH_AS(mp::LoadModelFile(WriteFile("empty.pt", "")), doctest::Contains("file is empty"), InputError);
  CHECK_THROWS_WITH_AS(mp::LoadModelFile(MP_MODELS_DIR), doctest::Contains("is a directory"), InputError);
  CHECK_THROWS_WITH_AS(mp::LoadModelFile(WriteFile("text.pt", "hello, not a model\n")),
                       doctest::Contains("not a zip archive"), InputError);
}

TEST_CASE("a truncated model file") {
  std::ifstream in(ZooPath("toy.script.pt"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK_THROWS_WITH_AS(mp::LoadModelFile(WriteFile("truncated.pt", bytes.substr(0, bytes.size() / 2))),
                       doctest::Contains("damaged zip archive"), InputError);
}

TEST_CASE("a zip that is not TorchScript (torch.save of a state dict)") {
  CHECK_THROWS_WITH_AS(mp::LoadModelFile(ZooPath("fixtures/toy_state_dict.pt")), doctest::Contains("zip archive but not TorchScript"), InputError);
}

TEST_CASE("TorchScript without forward") {
  const auto path = TempPath("noforward.pt");
  torch::jit::Module module("NoForward");
  module.register_parameter("w", torch::ones({2}), false);
  module.save(path);
  CHECK_THROWS_WITH_AS(mp::LoadModelFile(path), doctest::Contains("has no forward method"), InputError);
}

TEST_CASE("an error message is one line") {
  try {
    mp::LoadModelFile(WriteFile("truncated2.pt", "PK\x03\x04garbage"));
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find('\n') == std::string::npos);
  }
}
