// WholeGraph: the canonical graph run in one piece by the plain interpreter,
// timed forward and backward. The profiler's reference for coverage (the sum
// of per-node times against the whole), and the workload of the contention
// probe (copies of it running at once on CPU workers).
#pragma once

#include <torch/script.h>

#include <functional>
#include <vector>

#include "planner/graph/canonical_graph.h"
#include "planner/graph/run_graph.h"
#include "planner/profile/pass_options.h"

namespace mp {

class WholeGraph {
 public:
  // Moves `model_inputs` and the parameters to options.device and runs one
  // forward and backward, so a model autograd cannot differentiate fails
  // here (InputError), before any timed work.
  WholeGraph(const CanonicalGraph& canonical, const std::vector<c10::IValue>& model_inputs,
             const PassOptions& options);

  // Milliseconds of one forward; frees the previous run's activations first.
  double Forward();
  // Milliseconds of the backward of the latest Forward() (d sum of outputs /
  // d parameters), at most once per Forward(): it frees the graph, as a
  // training step does. 0 in inference or when nothing needs a gradient.
  double Backward();
  // Drops the parameters' gradients: the next Backward() makes them anew
  // rather than adding into them.
  void ForgetGradients();
  // The parameters that get gradients, in order: their .grad() holds what
  // the latest Backward() made (undefined for one it did not reach).
  const std::vector<at::Tensor>& Parameters() const { return params_; }

 private:
  PassOptions options_;
  GraphRunner runner_;
  std::function<void()> sync_;
  std::vector<c10::IValue> stack_;
  std::vector<at::Tensor> params_, outputs_, seeds_;
};

}  // namespace mp
