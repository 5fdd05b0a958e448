// FLOP and memory-traffic estimates of one canonical node from the shapes
// of the tensors it reads and writes. Plain values, no LibTorch, so the
// formulas are testable against hand-computed numbers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mp {

struct TensorDims {
  std::vector<int64_t> sizes;
  int64_t element_bytes = 4;

  int64_t Numel() const;
  int64_t Bytes() const { return Numel() * element_bytes; }
};

// Every tensor inside one node input or output, in order (a Tensor[] or a
// tuple contributes several, an int none).
using ArgTensors = std::vector<TensorDims>;

struct NodeWork {
  double flops = 0;        // multiply and add count separately: a k-long dot product is 2k
  double bytes_moved = 0;  // bytes read plus bytes written
};

// Heavy ops get their textbook count (conv, linear/addmm/matmul/bmm,
// attention, lstm/gru, norms, softmax, pooling); view and bookkeeping ops
// (view, transpose, size, list and tuple construction) cost nothing;
// every other op is treated as elementwise: one FLOP per output element
// of a floating result, plus the bytes it reads and writes.
NodeWork EstimateWork(const std::string& kind, const std::vector<ArgTensors>& inputs,
                      const std::vector<ArgTensors>& outputs);

}  // namespace mp
