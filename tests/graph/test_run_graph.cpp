// run_graph.h: ErrorLine turns LibTorch's many-line errors into the one
// line a user sees, quoting the code the interpreter marks as failing.
#include "tests/doctest_torch.h"

#include "planner/graph/canonical_graph.h"
#include "planner/graph/model_file.h"
#include "planner/graph/run_graph.h"
#include "zoo.h"

TEST_CASE("an interpreter error is quoted by its last line and the op its innermost frame marks") {
  auto model = mp::LoadModelFile(mp::test::ZooPath("toy.script.pt"));
  const mp::CanonicalGraph canonical = mp::Canonicalize(model.module);
  std::string what;
  try {
    mp::GraphRunner(canonical.graph).Run(canonical.Stack({at::zeros({20, 7})}));  // net1 takes 10 features
  } catch (const std::exception& e) {
    what = e.what();
  }
  INFO(what);
  REQUIRE(what.find("The following operation failed in the TorchScript interpreter") != std::string::npos);
  const std::string line = mp::ErrorLine(what);
  CHECK(line.rfind("RuntimeError: mat1 and mat2 shapes cannot be multiplied (20x7 and 10x10) (at `F.linear`, linear.py:",
                   0) == 0);
  CHECK(line.find('\n') == std::string::npos);
}

TEST_CASE("code given as text is quoted without a file") {
  torch::jit::CompilationUnit unit;
  unit.define(c10::nullopt, "def pairs(x):\n    return x.reshape(x.size(0) // 2, 2, 3)\n", torch::jit::nativeResolver(),
              nullptr);
  std::string what;
  try {
    unit.get_function("pairs")({at::zeros({1, 3})});
  } catch (const std::exception& e) {
    what = e.what();
  }
  INFO(what);
  CHECK(mp::ErrorLine(what) == "RuntimeError: shape '[0, 2, 3]' is invalid for input of size 3 (at `x.reshape`)");
}

TEST_CASE("other errors keep their first line, without LibTorch's source location") {
  CHECK(mp::ErrorLine("bad thing\nException raised from f at x.cpp:1") == "bad thing");
  CHECK(mp::ErrorLine("[enforce fail at inline_container.cc:129] . file in archive is not in a subdirectory") ==
        "file in archive is not in a subdirectory");
}
