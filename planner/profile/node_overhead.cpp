#include "planner/profile/node_overhead.h"

#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/jit/ir/irparser.h>
#include <torch/script.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "planner/graph/run_graph.h"
#include "planner/profile/device_sync.h"
#include "planner/profile/timer.h"

namespace mp {
namespace {

constexpr int kChain = 32;     // operators in the chain
constexpr int kRounds = 200;   // rounds, each a sample of every kind

// relu applied `length` times in one program.
GraphRunner Chain(int length) {
  std::string ir = "graph(%x0 : Tensor):\n";
  for (int i = 0; i < length; ++i) {
    ir += "  %x" + std::to_string(i + 1) + " : Tensor = aten::relu(%x" + std::to_string(i) + ")\n";
  }
  ir += "  return (%x" + std::to_string(length) + ")\n";
  auto graph = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(ir, graph.get());
  return GraphRunner(graph, "overhead");
}

// `program` on `input`, timed as the profiler times a node: its stack
// built before the clock starts, its outputs kept after it stops.
double TimedRun(const GraphRunner& program, const at::Tensor& input, const std::function<void()>& sync,
                at::Tensor* output = nullptr) {
  std::vector<c10::IValue> stack{input}, outputs;
  const double ms = SyncedMs([&] { outputs = program.Run(std::move(stack)); }, sync);
  if (output) *output = outputs.at(0).toTensor();
  return ms;
}

}  // namespace

NodeOverhead MeasureNodeOverhead(c10::Device device, const std::function<void()>& sync, bool training) {
  const GraphRunner one = Chain(1), chain = Chain(kChain);
  const at::Tensor input = torch::rand({8, 8}, at::TensorOptions().device(device));
  std::vector<double> call, call_share, leaf, leaf_share, backward, backward_share;
  // Each kind in turn, so that no sample runs right after its own kind:
  // the profiler's node runs after other work too (the node before it,
  // its own bookkeeping), and back to back a one-node program ran in
  // a quarter of the time it took after other work (0.2 us against 0.8
  // more than its share of the chain; ShuffleNetV2's 821 nodes summed to
  // 1.14x its whole forward, 1.1 us a node).
  for (int round = 0; round < kRounds; ++round) {
    call.push_back(TimedRun(one, input, sync));
    call_share.push_back(TimedRun(chain, input, sync) / kChain);
    if (!training) continue;
    // As the profiler hands a node its inputs: a fresh leaf each time.
    const at::Tensor fresh = input.detach().requires_grad_(true);
    at::Tensor out;
    leaf.push_back(TimedRun(one, fresh, sync, &out));
    const at::Tensor start = input.detach().requires_grad_(true);
    at::Tensor chained;
    leaf_share.push_back(TimedRun(chain, start, sync, &chained) / kChain);
    const at::Tensor seed = torch::ones_like(out);
    backward.push_back(SyncedMs([&] { torch::autograd::grad({out}, {fresh}, {seed}); }, sync));
    backward_share.push_back(SyncedMs([&] { torch::autograd::grad({chained}, {start}, {seed}); }, sync) / kChain);
  }
  const auto excess = [](const std::vector<double>& alone, const std::vector<double>& share) {
    return std::max(0.0, Quantile(alone, 0.5) - Quantile(share, 0.5));
  };
  NodeOverhead overhead;
  overhead.forward_call_ms = excess(call, call_share);
  if (!training) return overhead;
  // The leaf's run pays the call too, and its operator records autograd
  // as the chain's do.
  overhead.forward_leaf_ms = std::max(0.0, excess(leaf, leaf_share) - overhead.forward_call_ms);
  overhead.backward_call_ms = excess(backward, backward_share);
  return overhead;
}

}  // namespace mp
