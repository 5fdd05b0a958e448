// RewriteContextManagers: the `with` statements forward may hold, made
// plain ops: torch.no_grad() (a frozen teacher, a mask computed without
// gradients, an EMA update), torch.autograd.profiler.record_function (a
// profiler label) and torch.cuda.amp.autocast(enabled=False) (a region kept
// out of mixed precision).
#pragma once

#include <torch/script.h>

namespace mp {

// Runs on an inlined graph, before LiftParameters. A scripted `with` is an
// object made by prim::CreateObject, its __init__'s prim::SetAttrs, and a
// prim::Enter ... prim::Exit pair around each body in one block (one
// object may serve several). This pass removes the object, its SetAttrs
// and the pairs, and
//   - no_grad: gives every tensor a body reads from outside it (an
//     activation, or a parameter or buffer reached by prim::GetAttr)
//     through one `aten::detach`. So nothing the body computes requires a
//     gradient, no gradient reaches what it read, and its in-place writes
//     to what it read (an EMA of a buffer or of weights) write the same
//     storage, as under no_grad. Where a body reads a list, tuple or dict
//     holding tensors from outside, its tensor results used after it are
//     detached too;
//   - record_function: nothing more (a label changes no value);
//   - autocast with `enabled` a constant false: nothing more (plans run
//     every op in its model's dtypes, so a region that turns mixed
//     precision off computes what the rest does).
// Returns the number of objects rewritten. Throws InputError, naming the
// class and what is wrong, for autocast that may be enabled, and for an
// object used otherwise (an Enter without an Exit after it in its block,
// the object passed on), and for a `with` on an object of any other class
// (one of the user's own).
int RewriteContextManagers(torch::jit::Graph& graph);

}  // namespace mp
