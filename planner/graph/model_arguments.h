// BindArguments: forward's arguments made the canonical graph's model
// inputs, one tensor each. Arguments the input spec does not give take
// their default values (an `attention_mask: Optional[Tensor] = None`, a
// `scale: float = 2.0`), as a Python call that leaves them out would; a
// tuple of tensors (an LSTM's `hidden: Tuple[Tensor, Tensor]`) is given as
// one input per element.
#pragma once

#include <torch/script.h>

#include <string>
#include <vector>

namespace mp {

// Which of forward's arguments an input spec gives.
struct GivenArguments {
  // How many tensors, for forward's leading arguments (a tuple's elements
  // one each). < 0: as many as the arguments without a default take.
  int count = -1;
  // The inputs' names, when the spec has them (`hidden[0]` for a tuple's
  // element). Where every one is one of forward's inputs (ModelInputNames)
  // they are the inputs given, in any order, and may leave out an argument
  // in the middle (Hugging Face's token_type_ids given, attention_mask
  // not); otherwise `count` says which.
  std::vector<std::string> names;
};

// Runs on forward's graph (input 0 is self). A Tensor or an
// Optional[Tensor] given takes one input (typed Tensor, as it is given
// one), a Tuple[Tensor, ...] one per element (it becomes that many graph
// inputs, tupled at the start of the graph). Every argument not given
// becomes a constant of its default value. Returns the model input names,
// in forward's order, one per graph input after self. Throws InputError
// naming the argument when one that is given is not a tensor, an
// Optional[Tensor] or a tuple of tensors (an int or a float with a
// default: an input spec cannot give it), when one without a default is
// not given, or when a tuple is given in part.
std::vector<std::string> BindArguments(torch::jit::Graph& graph, const c10::FunctionSchema& schema,
                                       const GivenArguments& given);

// The names an input spec may give forward's arguments by: each one's
// name, `hidden[0]`, `hidden[1]` for a tuple of tensors' elements.
std::vector<std::string> ModelInputNames(const c10::FunctionSchema& schema);

// Whether an input spec can give an argument of this type: a Tensor, an
// Optional[Tensor] or a tuple of tensors (LoadModelFile's check, and
// BindArguments' for the arguments it covers).
bool SpecCanGive(const c10::TypePtr& type);

}  // namespace mp
