// Running a TorchScript graph directly in the JIT interpreter.
#pragma once

#include <torch/script.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "planner/graph/input_spec.h"

namespace mp {

// Compiles a graph once and runs it any number of times, in the plain
// interpreter: no profiling executor, no fusion, no specialisation, so what
// runs is exactly the graph's ops (what the planner measured and cut).
class GraphRunner {
 public:
  explicit GraphRunner(const std::shared_ptr<torch::jit::Graph>& graph,
                       const std::string& name = "graph");
  // Takes the graph's inputs in order, returns its outputs in order.
  std::vector<c10::IValue> Run(std::vector<c10::IValue> inputs) const;

 private:
  torch::jit::Code code_;
};

// One line for a LibTorch error: the operator's own message (the last line)
// when the TorchScript interpreter wrapped it, followed by the code its
// traceback marks ("RuntimeError: ... (at `x.add_(shift)`)"), else the
// first line (what follows is a C++ backtrace).
std::string ErrorLine(const std::string& what);

// Every tensor inside an IValue (tensors, lists, tuples, dicts' values in
// their insertion order, nested), in order.
std::vector<at::Tensor> FlattenTensors(const c10::IValue& value);

// Rebuilds `value` with fn applied to every tensor inside, visiting them in
// FlattenTensors order.
c10::IValue MapTensors(const c10::IValue& value, const std::function<at::Tensor(const at::Tensor&)>& fn);

// Inputs with every tensor inside them copied: a model may write into its
// inputs (x.add_(h)), and the caller's tensors must stay as given.
std::vector<c10::IValue> CloneTensors(const std::vector<c10::IValue>& values);

// Deterministic random inputs for a spec: floats ~ N(0,1), integers
// uniform in the spec's [low, high) or [0, 2) when it has no range.
std::vector<c10::IValue> SyntheticInputs(const std::vector<TensorSpec>& specs, uint64_t seed = 0);

// float32, int64, ... for a LibTorch scalar type.
std::string DtypeName(c10::ScalarType type);

}  // namespace mp
