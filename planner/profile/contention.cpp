#include "planner/profile/contention.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <memory>
#include <thread>

#include "common/error.h"
#include "planner/profile/timer.h"
#include "planner/profile/whole_graph.h"

namespace mp {
namespace {

constexpr double kSpanMs = 300;
constexpr int kMaxTurns = 10;

double RunOnce(WholeGraph& graph) {
  const double forward = graph.Forward();
  return forward + graph.Backward();
}

// One run of each of the first `copies` graphs, all running together: a
// copy that finishes first runs again (untimed) until every copy has its
// sample.
std::vector<double> RunTogether(std::vector<std::unique_ptr<WholeGraph>>& graphs, int copies, int threads) {
  std::vector<double> samples(copies, 0.0);
  std::vector<std::exception_ptr> errors(copies);
  std::atomic<int> ready{0}, done{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < copies; ++w) {
    workers.emplace_back([&, w] {
      bool counted = false;
      ready.fetch_add(1);
      while (ready.load() < copies) std::this_thread::yield();  // start together
      try {
        at::set_num_threads(threads);
        while (done.load() < copies) {
          const double ms = RunOnce(*graphs[w]);
          if (!counted) samples[w] = ms, counted = true, done.fetch_add(1);
        }
      } catch (...) {
        errors[w] = std::current_exception();
        if (!counted) done.fetch_add(1);
      }
    });
  }
  for (auto& t : workers) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  return samples;
}

}  // namespace

std::vector<double> MeasureSharedSlowdown(const CanonicalGraph& canonical, const std::vector<c10::IValue>& model_inputs,
                                          const PassOptions& options, int workers, int threads, int repeats) {
  if (workers < 1 || threads < 1 || repeats < 1)
    throw InternalError(Concat("contention probe: workers ", workers, ", threads ", threads, ", repeats ", repeats));
  // Each copy on its own inputs, in case the graph writes to them.
  const auto copy = [&] {
    std::vector<c10::IValue> inputs;
    for (const auto& v : model_inputs) inputs.push_back(MapTensors(v, [](const at::Tensor& t) { return t.clone(); }));
    return std::make_unique<WholeGraph>(canonical, inputs, options);
  };
  std::vector<std::unique_ptr<WholeGraph>> graphs;
  graphs.push_back(copy());
  std::vector<double> slowdown{1.0};
  for (int k = 2; k <= workers; ++k) {
    graphs.push_back(copy());
    // Alone and together in turns, so a neighbour's load on this shared
    // machine falls on both sides of the ratio; small graphs take more
    // turns, up to kMaxTurns, until the samples span kSpanMs: three turns
    // of a 35 ms graph gave 1.02 and 1.37 in two runs minutes apart.
    std::vector<double> alone, together;
    double spent = 0;
    for (int r = 0; r < repeats || (spent < kSpanMs && r < kMaxTurns); ++r) {
      for (double ms : RunTogether(graphs, 1, threads)) alone.push_back(ms), spent += ms;
      for (double ms : RunTogether(graphs, k, threads)) together.push_back(ms), spent += ms;
    }
    const double base = Quantile(alone, 0.5);
    slowdown.push_back(base > 0 ? std::max(1.0, Quantile(together, 0.5) / base) : 1.0);
  }
  return slowdown;
}

}  // namespace mp
