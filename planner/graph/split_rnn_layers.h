// SplitRnnLayers: canonicalisation's rewrite of a multi-layer recurrent op
// with dropout between its layers (nn.LSTM / nn.GRU / nn.RNN with
// `dropout=p`, num_layers > 1, in training) into one call per layer and an
// aten::dropout between them, as ATen's own layer loop does (RNN.cpp,
// _rnn_impl: each layer's output goes through dropout(p, train) before the
// next). SeedRandomOps, which runs next, then gives those dropouts their own
// generators. Left whole, the op draws its masks from LibTorch's global
// generator inside the kernel: LibTorch 1.13 does not call it random, so a
// pipeline's masks silently differed from one device's (pytorch/examples'
// word language model trained to other weights than its single-device run),
// and 2.x refuses it as a random op mpexec cannot seed.
//
// Each layer's call takes its slice of the initial states (rows l·D to
// (l+1)·D, D = 2 when bidirectional) and of the weight list, num_layers 1
// and dropout 0.0; the final states are the layers' concatenated. The same
// kernels run in the same order, so without dropout the values are the
// whole op's. A single-layer op with dropout draws nothing in ATen: its
// dropout becomes a constant 0.0.
#pragma once

#include <torch/script.h>

namespace mp {

// Returns how many ops it split. Throws InputError naming the op when one
// that may draw has a num_layers or bidirectional that is not a constant,
// or weights that are not a literal list.
int SplitRnnLayers(torch::jit::Graph& graph);

}  // namespace mp
