// Canonicalisation speed: for each model file given, times torch::jit::load
// and Canonicalize (median of N runs) and prints both with their ratio.
// The target for ResNet-50 is under 1 s.
//
//   build/bench/bench_canonicalize build/models/resnet50.script.pt [--repeat 5]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/median.h"
#include "common/error.h"
#include "planner/graph/canonical_graph.h"
#include "planner/graph/model_file.h"

namespace {

using mp::bench::Median;

}  // namespace

int main(int argc, char** argv) {
  int repeat = 5;
  std::vector<std::string> models;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else {
      models.push_back(argv[i]);
    }
  }
  if (models.empty()) {
    std::fprintf(stderr, "usage: bench_canonicalize MODEL.pt... [--repeat N]\n");
    return 2;
  }
  std::printf("%-40s %8s %10s %14s %8s %8s\n", "model", "nodes", "load ms", "canonical ms",
              "ratio", "<1s");
  try {
    for (const auto& path : models) {
      std::vector<double> load_ms, canon_ms;
      size_t nodes = 0;
      for (int r = 0; r < repeat; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        mp::ModelFile model = mp::LoadModelFile(path);
        auto t1 = std::chrono::steady_clock::now();
        mp::CanonicalGraph canonical = mp::Canonicalize(model.module);
        auto t2 = std::chrono::steady_clock::now();
        nodes = canonical.nodes.size();
        load_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        canon_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
      }
      const double load = Median(load_ms), canon = Median(canon_ms);
      std::printf("%-40s %8zu %10.1f %14.1f %8.2f %8s\n", path.c_str(), nodes, load, canon,
                  canon / load, canon < 1000.0 ? "yes" : "NO");
    }
  } catch (const mp::Error& e) {
    std::fprintf(stderr, "bench_canonicalize: %s\n", e.what());
    return 1;
  }
  return 0;
}
