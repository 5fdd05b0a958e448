// bench_split: what splitting a stage's backward into I and W costs against
// one B (issue 26). Each model is cut in two (canonical nodes [0, c) and
// [c, n)) at a quarter, half and three quarters of its nodes; the second
// stage is the one zb-h1 splits (the first stage's inputs take no gradient,
// so its W is one plain B). Its forward runs on what the first stage sent,
// as fresh leaves, as mpexec's workers receive them; then either B (one
// backward) or I then W (SplitBackward, as the workers run them), the two
// alternating in one process on one thread, medians of the rounds. Prints
// B, I, W, (I + W) / B and I + W - B, the split's cost in milliseconds.
//
//   bench_split MODEL.pt[:BATCH,...] ... [--rounds N]
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bench/median.h"
#include "common/error.h"
#include "planner/graph/canonical_graph.h"
#include "planner/graph/cut.h"
#include "planner/graph/input_spec.h"
#include "planner/graph/model_file.h"
#include "planner/graph/run_graph.h"
#include "planner/graph/split_backward.h"
#include "planner/profile/aligning_allocator.h"

namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

using mp::bench::Median;

struct Split {
  double b = 0, i = 0, w = 0;
};

// The second stage of `canonical` cut before node `cut`, at `batch`
// samples: `rounds` of B and of I then W, alternating.
Split Measure(const mp::CanonicalGraph& canonical, const std::vector<mp::TensorSpec>& spec, int cut, int64_t batch,
              int rounds) {
  std::vector<int> stage_of(canonical.nodes.size(), 1);
  std::fill(stage_of.begin(), stage_of.begin() + cut, 0);
  const std::vector<mp::StageGraph> stages = mp::CutStages(canonical, stage_of);
  std::map<mp::BoundaryValue, c10::IValue> env;
  std::vector<c10::IValue> stack = canonical.Stack(mp::SyntheticInputs(mp::WithBatch(spec, batch)));
  std::vector<at::Tensor> params;  // the second stage's, as leaves
  for (size_t i = 0; i < stack.size(); ++i) {
    if (i >= canonical.num_model_inputs && stack[i].isTensor()) {
      at::Tensor p = stack[i].toTensor();
      if (p.is_floating_point() && canonical.params[i - canonical.num_model_inputs].tensor.requires_grad()) {
        stack[i] = p.detach().requires_grad_(true);
      }
    }
    env[{canonical.graph->inputs()[i], 0}] = stack[i];
  }
  std::vector<c10::IValue> first;
  for (const auto& key : stages[0].inputs) first.push_back(env.at(key));
  {
    at::NoGradGuard no_grad;
    const auto made = mp::GraphRunner(stages[0].graph).Run(first);
    for (size_t i = 0; i < made.size(); ++i) env[stages[0].outputs[i]] = made[i];
  }
  for (const auto& key : stages[1].inputs) {
    const c10::IValue& v = env.at(key);
    if (v.isTensor() && v.toTensor().requires_grad() && v.toTensor().is_leaf()) params.push_back(v.toTensor());
  }
  const mp::GraphRunner second(stages[1].graph);
  // One forward of the second stage on fresh leaves; the loss is the mean
  // square of its first tensor output.
  auto forward = [&](std::vector<at::Tensor>& leaves) {
    std::vector<c10::IValue> inputs;
    leaves.clear();
    for (const auto& key : stages[1].inputs) {
      c10::IValue v = env.at(key);
      const bool received = key.value->node()->kind() != c10::prim::Param;  // not a model input or parameter
      if (received && v.isTensor() && v.toTensor().is_floating_point()) {
        at::Tensor leaf = v.toTensor().detach().requires_grad_(true);
        leaves.push_back(leaf);
        v = leaf;
      }
      inputs.push_back(v);
    }
    const auto out = second.Run(std::move(inputs));
    for (const auto& value : out) {
      for (const at::Tensor& t : mp::FlattenTensors(value)) {
        if (t.requires_grad()) return t.to(at::kFloat).pow(2).mean();
      }
    }
    throw mp::InputError("the second stage makes no tensor that takes a gradient");
  };
  std::vector<double> b, i, w;
  for (int r = 0; r < rounds + 3; ++r) {
    for (int kind = 0; kind < 2; ++kind) {
      const bool split = (kind + r) % 2 == 1;
      std::vector<at::Tensor> leaves;
      const at::Tensor loss = forward(leaves);
      const auto start = Clock::now();
      if (!split) {
        loss.backward();
        if (r >= 3) b.push_back(MsSince(start));
        continue;
      }
      mp::SplitBackward backward({loss}, {at::ones_like(loss)}, leaves, params);
      const double input_ms = MsSince(start);
      const auto weights = Clock::now();
      backward.Weights();
      if (r >= 3) i.push_back(input_ms), w.push_back(MsSince(weights));
    }
  }
  return {Median(b), Median(i), Median(w)};
}

}  // namespace

int main(int argc, char** argv) {
  mp::KeepFreedMemoryAligned();  // as mpplan and mpexec allocate: see aligning_allocator.h
  at::set_num_threads(1);
  std::vector<std::string> models;
  int rounds = 30;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--rounds" && a + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++a]));
    } else {
      models.push_back(arg);
    }
  }
  if (models.empty()) {
    std::fprintf(stderr, "usage: bench_split MODEL.pt[:BATCH,...] ... [--rounds N]\n");
    return 2;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::printf("%-22s %6s %5s %9s %9s %9s %9s %9s\n", "model", "cut", "batch", "B ms", "I ms", "W ms", "(I+W)/B",
              "I+W-B ms");
  double worst = 0, worst_b = 0;
  for (const std::string& entry : models) {
    const size_t colon = entry.rfind(':');
    const std::string path = colon == std::string::npos ? entry : entry.substr(0, colon);
    std::vector<int64_t> batches{2, 8, 32};
    if (colon != std::string::npos) {
      batches.clear();
      std::stringstream list(entry.substr(colon + 1));
      for (std::string b; std::getline(list, b, ',');) batches.push_back(std::stoll(b));
    }
    try {
      mp::ModelFile file = mp::LoadModelFile(path);
      mp::CanonicalOptions options;
      options.training = true;
      const mp::CanonicalGraph canonical = mp::Canonicalize(file.module, options);
      const int n = int(canonical.nodes.size());
      const std::string name = path.substr(path.find_last_of('/') + 1);
      for (int quarter = 1; quarter <= 3; ++quarter) {
        const int cut = std::clamp(n * quarter / 4, 1, n - 1);
        for (int64_t batch : batches) {
          const Split s = Measure(canonical, file.input_spec, cut, batch, rounds);
          const double ratio = (s.i + s.w) / s.b;
          std::printf("%-22s %6s %5lld %9.3f %9.3f %9.3f %9.3f %9.3f\n", name.c_str(),
                      (std::to_string(cut) + "/" + std::to_string(n)).c_str(), static_cast<long long>(batch), s.b,
                      s.i, s.w, ratio, s.i + s.w - s.b);
          if (ratio > worst) worst = ratio, worst_b = s.b;
        }
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_split: %s: %s\n", path.c_str(), e.what());
      return 1;
    }
  }
  std::printf("worst (I+W)/B %.3f (its B %.3f ms)\n", worst, worst_b);
  return 0;
}
