// Which values no gradient reaches in training. Autograd records a node
// only where one of its inputs requires a gradient: a frozen backbone
// (`p.requires_grad_(False)`), LoRA's base weights, batch norm's running
// statistics and the model's inputs do not, nor what torch.no_grad()'s
// bodies compute (they read through one aten::detach: context_managers.h).
// A stage of such values runs no backward, keeps nothing for one and is
// sent no gradient; charging it one (a cut in a frozen ResNet's first
// layers) made gradients cross cuts that never carry any.
//
// A value takes a gradient if it is a parameter that is not frozen, or a
// node's output where the node is not aten::detach and one of its inputs
// takes one, or a value written in place by a node one of whose inputs
// takes one (`buf[:, 0] = linear(x)`, `x.add_(shift)`), but for the running
// statistics a normalisation writes. The safe side where unsure: an op on
// a value that takes a gradient is taken to pass it on (zeros_like does
// not), as autograd's requires_grad would say of most.
#pragma once

#include <vector>

#include "planner/graph/op_graph.h"

namespace mp {

struct InPlaceWrite {
  int value = -1;               // the value written (or one it is a view of)
  int writer = -1;              // the top-level node that writes it
  bool statistics = false;      // a normalisation's running statistics: no gradient flows in
};

// Sets OpValue::gradient_free from OpValue::frozen and the writes
// (BuildOpGraph does, from the mutation analysis).
void MarkGradientFree(OpGraph& graph, const std::vector<InPlaceWrite>& writes);

}  // namespace mp
