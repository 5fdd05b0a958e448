// For every zoo model and variant: the canonical graph computes exactly what
// torch::jit::load(...)->forward computes, and so do its stages chained
// after at least 20 random valid cuts into 2-4 stages.
#include "tests/doctest_torch.h"

#include <random>

#include "common/error.h"
#include "planner/graph/canonical_graph.h"
#include "planner/graph/cut.h"
#include "planner/graph/model_file.h"
#include "planner/graph/rng_scope.h"
#include "zoo.h"

namespace {

// The embedded spec with the batch cut to at most `batch`: exactness does
// not depend on the batch size, test time does.
std::vector<mp::TensorSpec> SmallSpec(std::vector<mp::TensorSpec> specs, int64_t batch) {
  for (auto& s : specs) {
    if (!s.shape.empty()) s.shape[s.batch_dim] = std::min(s.shape[s.batch_dim], batch);
  }
  return specs;
}

// A random cut into exactly k stages in which no node reads from a later
// stage: a random contiguous split, then nodes pulled one stage earlier at
// random where their inputs allow it, so stages are not always contiguous.
std::vector<int> RandomCut(const mp::CanonicalGraph& c, int k, std::mt19937& rng) {
  const int n = static_cast<int>(c.nodes.size());
  for (;;) {
    std::vector<int> bounds;
    for (int s = 1; s < k; ++s) bounds.push_back(std::uniform_int_distribution<int>(1, n - 1)(rng));
    std::sort(bounds.begin(), bounds.end());
    std::vector<int> stage(n);
    for (int i = 0; i < n; ++i) {
      int base = static_cast<int>(std::upper_bound(bounds.begin(), bounds.end(), i) - bounds.begin());
      int lowest = 0;
      for (const auto* v : mp::OuterInputs(c.nodes[i])) {
        const int version = c.mutation.VersionAt(v, i);
        int holder = -1;
        if (version > 0) {
          holder = stage[c.mutation.WritersOf(v)[version - 1]];
        } else if (v->node()->kind() != c10::prim::Param) {
          holder = stage[c.NodeId(v->node())];
        }
        if (!c.mutation.rematerializable.count(v)) lowest = std::max(lowest, holder);
      }
      const bool pull = std::uniform_int_distribution<int>(0, 3)(rng) == 0;
      stage[i] = std::max(lowest, base - (pull ? 1 : 0));
    }
    std::vector<int> count(k, 0);
    for (int s : stage) ++count[s];
    if (std::count(count.begin(), count.end(), 0) == 0) return stage;
  }
}

}  // namespace

TEST_CASE("every zoo model: canonical graph and random cuts equal forward bit-exactly") {
  const auto files = mp::test::ZooFiles();
  REQUIRE(files.size() >= (mp::test::ZooSubset().empty() ? 16u : 1u));
  std::mt19937 rng(12345);
  for (const auto& file : files) {
    CAPTURE(file);
    auto model = mp::LoadModelFile(mp::test::ZooPath(file));
    auto canonical = mp::Canonicalize(model.module);
    REQUIRE(!model.input_spec.empty());
    REQUIRE(canonical.nodes.size() >= 2);
    const auto inputs = mp::SyntheticInputs(mp::test::SmallResNetSpecs(file, SmallSpec(model.input_spec, 3)), 7);

    // Each run on its own copy: a model may write into its inputs (inputwrite).
    const auto want = model.module.forward(mp::CloneTensors(inputs));
    const auto whole = mp::GraphRunner(canonical.graph).Run(canonical.Stack(mp::CloneTensors(inputs)));
    mp::test::CheckBitEqual(whole, {want});

    int cuts = 0;
    for (int trial = 0; trial < 24; ++trial) {
      const int max_k = std::min<int>(4, static_cast<int>(canonical.nodes.size()));
      const int k = 2 + trial % (max_k - 1);
      auto assignment = RandomCut(canonical, k, rng);
      auto stages = mp::CutStages(canonical, assignment);
      REQUIRE(static_cast<int>(stages.size()) == k);
      mp::test::CheckBitEqual(mp::RunStages(canonical, stages, mp::CloneTensors(inputs)), {want});
      ++cuts;
    }
    CHECK(cuts >= 20);
  }
}

TEST_CASE("the in-place model, cut between a write and the readers around it") {
  auto model = mp::LoadModelFile(mp::test::ZooPath("inplace.script.pt"));
  auto canonical = mp::Canonicalize(model.module);
  const auto inputs = mp::SyntheticInputs(model.input_spec, 3);
  const auto want = model.module.forward(inputs);
  // Every node on its own stage, so every in-place write crosses a cut.
  std::vector<int> own(canonical.nodes.size());
  for (size_t i = 0; i < own.size(); ++i) own[i] = static_cast<int>(i);
  mp::test::CheckBitEqual(mp::RunStages(canonical, mp::CutStages(canonical, own), inputs), {want});
}

TEST_CASE("zoo models with random ops, in training: cuts draw what the whole graph draws, the global generator never") {
  std::mt19937 rng(777);
  int random_models = 0;
  for (const auto& file : mp::test::ZooFiles()) {
    auto model = mp::LoadModelFile(mp::test::ZooPath(file));
    mp::CanonicalOptions training;
    training.training = true;
    auto canonical = mp::Canonicalize(model.module, training);
    if (canonical.random_ops == 0) continue;
    ++random_models;
    CAPTURE(file);
    const at::NoGradGuard no_grad;  // the numbers drawn do not depend on autograd
    const auto inputs = mp::SyntheticInputs(SmallSpec(model.input_spec, 3), 5);
    at::Generator global = at::detail::getDefaultCPUGenerator();
    const at::Tensor before = global.get_state();
    const auto run_whole = [&](const mp::RngKey& key) {
      const mp::RngScope scope(key);
      return mp::GraphRunner(canonical.graph).Run(canonical.Stack(mp::CloneTensors(inputs)));
    };
    const auto want = run_whole({3, 1, 2});
    for (int trial = 0; trial < 6; ++trial) {
      const int k = 2 + trial % 3;
      const auto stages = mp::CutStages(canonical, RandomCut(canonical, k, rng));
      const mp::RngScope scope({3, 1, 2});
      mp::test::CheckBitEqual(mp::RunStages(canonical, stages, mp::CloneTensors(inputs)), want);
    }
    const auto other = run_whole({3, 1, 3});  // another micro-batch draws other masks
    CHECK_FALSE(at::equal(mp::FlattenTensors(other[0])[0], mp::FlattenTensors(want[0])[0]));
    CHECK(at::equal(global.get_state(), before));
  }
  if (mp::test::ZooSubset().empty()) CHECK(random_models >= 3);  // bert, gpt2, mobilenet
}
