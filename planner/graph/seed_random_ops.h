// SeedRandomOps: canonicalisation's last rewrite. Every random op of the
// graph, in its blocks too, is made to draw from OpGenerator(k) (rng_scope.h),
// k being its ordinal among the graph's random ops, never from LibTorch's
// global generator. Which ops are random comes from the operator registry:
//   - an op with a `Generator? generator` argument (31 names in LibTorch
//     1.13: bernoulli, normal, uniform_, multinomial, rrelu, ...) gets
//     `mp::generator(k)` for it;
//   - an overload without one whose name has an overload that differs only
//     by it (aten::rand -> aten::rand.generator) becomes that overload;
//   - the ops the registry has no generator overload for (the dropout
//     family, native_dropout, rand_like, randn_like, randint_like, and
//     LibTorch 2.x's scaled_dot_product_attention) become their mp:: twins,
//     which take the generator last and compute what ATen's CPU kernels
//     compute (attention: ATen's math path, its dropout from the generator).
// Dropout with a constant `train` of false draws nothing and is left as is;
// so is attention whose dropout_p is a constant 0 (its fused kernels stay).
#pragma once

#include <torch/script.h>

namespace mp {

// Returns the number of random ops. Throws InputError for a random op it
// cannot seed (one the JIT calls nondeterministic that fits no rule above),
// naming it.
int SeedRandomOps(torch::jit::Graph& graph);

// Whether an op with a dropout argument (aten::lstm, gru, rnn_*,
// scaled_dot_product_attention, which LibTorch 2.x marks nondeterministic)
// draws nothing: that probability a constant 0, or `train` a constant false.
bool DrawsNothing(const torch::jit::Node* node);

}  // namespace mp
