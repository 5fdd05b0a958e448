// BindArguments: forward's arguments made the canonical graph's model
// inputs, one tensor each. Trailing arguments the input spec does not give
// take their default values (an `attention_mask: Optional[Tensor] =
// None`, a `scale: float = 2.0`), as a Python call that leaves them out
// would; a tuple of tensors (an LSTM's `hidden: Tuple[Tensor, Tensor]`) is
// given as one input per element.
#pragma once

#include <torch/script.h>

#include <string>
#include <vector>

namespace mp {

// Runs on forward's graph (input 0 is self). The spec gives `given` tensors
// (< 0: as many as the arguments without a default take), which cover
// forward's leading arguments in order: a Tensor or an Optional[Tensor]
// takes one (typed Tensor, as it is given one), a Tuple[Tensor, ...] one
// per element (it becomes that many graph inputs, tupled at the start of
// the graph). Arguments without a default are always covered. Every
// argument after those becomes a constant of its default value. Returns
// the model input names, one per graph input after self: an argument's
// name, `hidden[0]` for a tuple's element. Throws InputError naming the
// argument when one that is covered is not a tensor, an Optional[Tensor]
// or a tuple of tensors (an int or a float with a default: an input spec
// cannot give it).
std::vector<std::string> BindArguments(torch::jit::Graph& graph, const c10::FunctionSchema& schema, int given);

// Whether an input spec can give an argument of this type: a Tensor, an
// Optional[Tensor] or a tuple of tensors (LoadModelFile's check, and
// BindArguments' for the arguments it covers).
bool SpecCanGive(const c10::TypePtr& type);

}  // namespace mp
