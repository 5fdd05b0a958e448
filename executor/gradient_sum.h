// One sum of gradients over a process group, as mpexec makes every one
// (SyncGradients: a stage's over its replicas, tied parameters' over the
// ranks that read them) and as the probe that predicts it times it
// (ProbeAllReduceAfterStep, link_probe.h): the same code, so the
// prediction times what the run pays.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace mp {

class ProcessGroup;

// The gradients of `params` (leaf tensors, their .grad() filled by a
// backward) gathered into one new buffer per dtype, summed over `group` in
// one message per dtype (half and bfloat16 as float32), and each held
// parameter's .grad() made a view of its part of the sum: the buffer lives
// as long as the gradients do (until a step clears them). A parameter with
// no gradient adds zeros; one whose `held[i]` is false adds zeros and keeps
// its own gradient (empty `held`: all held). Returns the bytes sent
// (float32's for half and bfloat16). Throws what the group's sum throws.
int64_t SumGradients(ProcessGroup& group, const std::vector<at::Tensor>& params, const std::vector<bool>& held = {});

}  // namespace mp
