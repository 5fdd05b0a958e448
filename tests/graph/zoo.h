// Test helpers: where the exported zoo lives and bit-exact comparison of
// model outputs.
#pragma once

#include "tests/doctest_torch.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "planner/graph/input_spec.h"
#include "planner/graph/run_graph.h"

namespace mp::test {

inline std::string ZooPath(const std::string& file) { return std::string(MP_MODELS_DIR) + "/" + file; }

// The zoo files the environment's MP_TEST_ZOO names ("lstm.script.pt,gpt.trace.pt"),
// or none when it is unset or empty. The sanitizer jobs set it
// (tools/sanitize.sh says which files and why); tools/test.sh unsets it.
inline std::vector<std::string> ZooSubset() {
  std::vector<std::string> names;
  const char* list = std::getenv("MP_TEST_ZOO");
  std::stringstream in(list ? list : "");
  for (std::string name; std::getline(in, name, ',');) {
    if (!name.empty()) names.push_back(name);
  }
  return names;
}

// Every exported model file, sorted: branchy.script.pt, branchy.trace.pt,
// ...; only the MP_TEST_ZOO subset when one is set, each of its files checked
// to exist so that a misspelt name fails instead of sweeping less.
inline std::vector<std::string> ZooFiles() {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(MP_MODELS_DIR)) {
    if (entry.path().extension() == ".pt") files.push_back(entry.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  std::vector<std::string> subset = ZooSubset();
  if (subset.empty()) return files;
  for (const std::string& name : subset) {
    INFO("MP_TEST_ZOO names " << name);
    REQUIRE(std::find(files.begin(), files.end(), name) != files.end());
  }
  std::sort(subset.begin(), subset.end());
  return subset;
}

// A test's own list of models (zoo files, or held-out names), for the
// sanitizer jobs: where MP_TEST_ZOO is set, only those it names, or the
// list's first where it names none of them; else the whole list.
inline std::vector<std::string> ZooKeep(const std::vector<std::string>& files) {
  const std::vector<std::string> subset = ZooSubset();
  if (subset.empty()) return files;
  std::vector<std::string> kept;
  for (const std::string& file : files) {
    if (std::find(subset.begin(), subset.end(), file) != subset.end()) kept.push_back(file);
  }
  if (kept.empty() && !files.empty()) kept.push_back(files.front());
  return kept;
}

// The sweeps that check every zoo model at several stage counts (2, 3 and 4
// stages, or processes, or devices) run each model at one of them, not all
// (CI time): the i-th of `files` at counts[(i + turn) % counts.size()]; the
// test case for a count takes the files this returns for it. Each sweep has
// its own turn, so a model meets a different count in each sweep. The toy
// models have 3 nodes that take time: where their turn says more than 3
// stages, they take the largest count of 3 or fewer.
inline std::vector<std::string> ZooFilesAt(const std::vector<std::string>& files, const std::vector<int>& counts,
                                           int count, int turn) {
  std::vector<std::string> at;
  for (size_t i = 0; i < files.size(); ++i) {
    int mine = counts[(i + size_t(turn)) % counts.size()];
    if (files[i].rfind("toy.", 0) == 0 && mine > 3) {
      mine = 0;
      for (int c : counts) if (c <= 3) mine = std::max(mine, c);
    }
    if (mine == count) at.push_back(files[i]);
  }
  return at;
}

// The sweeps' --input for ResNet-50: `batch` (4 unless said) at 64x64,
// since its own 120 images of 128x128 take the same paths 25 times slower.
// Empty for the other models.
inline std::string SmallResNetInput(const std::string& file, int64_t batch = 4) {
  return file.rfind("resnet50", 0) == 0 ? " --input float32[" + std::to_string(batch) + ",3,64,64]" : "";
}

// The same for a model's input specs, for tests that run models in
// process: ResNet-50's images at 64x64, the other models' specs unchanged.
inline std::vector<mp::TensorSpec> SmallResNetSpecs(const std::string& file, std::vector<mp::TensorSpec> specs) {
  if (file.rfind("resnet50", 0) != 0) return specs;
  for (auto& spec : specs) {
    REQUIRE(spec.shape.size() == 4);
    spec.shape[2] = spec.shape[3] = 64;
  }
  return specs;
}

// A scratch folder for files a test writes, emptied per test binary run.
inline std::string TempPath(const std::string& name) {
  std::filesystem::create_directories(MP_TEST_TMP);
  return std::string(MP_TEST_TMP) + "/" + name;
}

// Same tensors, same order, same dtype and shape, identical bits.
inline void CheckBitEqual(const std::vector<c10::IValue>& got, const std::vector<c10::IValue>& want) {
  std::vector<at::Tensor> a, b;
  for (const auto& v : got) for (auto& t : FlattenTensors(v)) a.push_back(t);
  for (const auto& v : want) for (auto& t : FlattenTensors(v)) b.push_back(t);
  REQUIRE(a.size() == b.size());
  REQUIRE(!a.empty());
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK((a[i].scalar_type() == b[i].scalar_type()));
    REQUIRE((a[i].sizes() == b[i].sizes()));
    CHECK(torch::equal(a[i], b[i]));
  }
}

}  // namespace mp::test
