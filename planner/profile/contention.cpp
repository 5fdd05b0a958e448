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

double RunOnce(WholeGraph& graph) {
  const double forward = graph.Forward();
  return forward + graph.Backward();
}

// Samples of the first `copies` graphs running together, pooled.
std::vector<double> RunTogether(std::vector<std::unique_ptr<WholeGraph>>& graphs, int copies, int threads,
                                int repeats) {
  std::vector<std::vector<double>> samples(copies);
  std::vector<std::exception_ptr> errors(copies);
  std::atomic<int> ready{0}, done{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < copies; ++w) {
    workers.emplace_back([&, w] {
      bool counted = false;
      try {
        at::set_num_threads(threads);
        ready.fetch_add(1);
        while (ready.load() < copies) std::this_thread::yield();  // start together
        while (done.load() < copies) {
          const double ms = RunOnce(*graphs[w]);
          if (int(samples[w].size()) < repeats) samples[w].push_back(ms);
          if (!counted && int(samples[w].size()) == repeats) counted = true, done.fetch_add(1);
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
  std::vector<double> pooled;
  for (const auto& s : samples) pooled.insert(pooled.end(), s.begin(), s.end());
  return pooled;
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
  const double alone = Quantile(RunTogether(graphs, 1, threads, repeats), 0.5);
  std::vector<double> slowdown{1.0};
  for (int k = 2; k <= workers; ++k) {
    graphs.push_back(copy());
    const double together = Quantile(RunTogether(graphs, k, threads, repeats), 0.5);
    slowdown.push_back(alone > 0 ? std::max(1.0, together / alone) : 1.0);
  }
  return slowdown;
}

}  // namespace mp
