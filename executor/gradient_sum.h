// One sum of gradients over a process group, as mpexec makes every one
// (SyncGradients: a stage's over its replicas, tied parameters' over the
// ranks that read them) and as the probe that predicts it times it
// (ProbeAllReduceAfterStep, link_probe.h): the same code, so the
// prediction times what the run pays.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <vector>

namespace mp {

class ProcessGroup;

// What one sum of a set of gradients gathers into, per dtype, kept from step
// to step by its caller: Gloo sums into a buffer made new each step 3-4x
// slower than into a kept one (ResNet-50's 97.5 MiB over two processes of
// this host: 284-377 ms against 100-132, docs/BENCHMARKS.md). Between
// steps the gradients stay views of it and the next backward accumulates
// into them there (ZeroIfKept), as DDP's gradient_as_bucket_view
// does: one copy of the gradients, not a buffer beside them.
struct GatherBuffers {
  std::map<c10::ScalarType, at::Tensor> gathered;  // the gradients' dtype; their .grad() views it after a sum
  std::map<c10::ScalarType, at::Tensor> wire;      // float32, what half and bfloat16 are summed in
};

// The gradients of `params` (leaf tensors, their .grad() filled by a
// backward) gathered into one buffer per dtype, summed over `group` in one
// message per dtype (half and bfloat16 as float32), and each held
// parameter's .grad() made a view of its part of the sum. The buffer is
// `kept`'s from the last sum where nothing but those views of it is left
// (a gradient already in its place there, ZeroIfKept's, is not copied
// again); otherwise a new one, which `kept` keeps: a gradient a caller
// still holds from an earlier sum never changes under it. A parameter with
// no gradient adds zeros; one whose `held[i]` is false adds zeros and keeps
// its own gradient (empty `held`: all held). Returns the bytes sent
// (float32's for half and bfloat16). Throws what the group's sum throws.
int64_t SumGradients(ProcessGroup& group, const std::vector<at::Tensor>& params, GatherBuffers& kept,
                     const std::vector<bool>& held = {});

// Before a step's backward: whether `param`'s .grad() is a view a sum left
// in `kept`'s buffer, held by its parameter alone; if so it is zeroed there,
// for the backward to add into and the next sum to find in its place.
// (Another gradient a step drops; one a caller holds is the caller's.)
bool ZeroIfKept(const GatherBuffers& kept, const at::Tensor& param);

}  // namespace mp
