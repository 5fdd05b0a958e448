// BindDefaults: forward's trailing arguments that the input spec does not
// give take their default values (an `attention_mask: Optional[Tensor] =
// None`, a `scale: float = 2.0`), as a call from Python that leaves them
// out would.
#pragma once

#include <torch/script.h>

namespace mp {

// Runs on forward's graph (input 0 is self). The first `given` model
// arguments, and every argument without a default, stay graph inputs; an
// Optional[Tensor] among them is typed Tensor (it is given one). Every
// argument after them becomes a constant of its default value. Throws
// InputError naming the argument when one that stays is not a tensor (an
// int, a float with a default: an input spec cannot give it).
void BindDefaults(torch::jit::Graph& graph, const c10::FunctionSchema& schema, int given);

}  // namespace mp
