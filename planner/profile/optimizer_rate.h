// What the optimizer's step costs on the profiled device: each of sgd,
// momentum, adam and adamw (executor/optimizer.h, what mpexec runs) timed
// on a copy of the model's own trained parameters with gradients, in ms a
// MiB of those parameters. A step is memory-bound (multi-tensor
// operations: on a GPU a few launches over all of a device's tensors; on
// CPU a tensor at a time), so its cost on a stage is the rate times the
// stage's trained bytes (the model's mix of tensor sizes stays in the
// rate). CPU workers
// that step at once share the machine's memory bandwidth: with several,
// how much slower each steps its share then.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <map>
#include <string>
#include <vector>

namespace mp {

struct OptimizerRates {
  std::map<std::string, double> ms_per_mib;  // by name, one device stepping alone
  // [k - 1]: adam's step of 1/k of the parameters on each of k CPU workers
  // at once over the slowest share's alone, the medians of 11 rounds of
  // each in turn; [0] = 1. Empty: not measured. On this 2-core VM it moves
  // between runs (the MLP's at 2: 1.0 to 2.1x; mpexec's own two devices
  // 1.2x in one run, 2.0x in the next).
  std::vector<double> slowdown;
};

// The parameters that take a gradient (requires_grad, floating point);
// `steps` timed steps of each optimizer after one that makes its state,
// the median; the slowdown for 1..`workers` CPU workers of `threads`
// threads each (on `device` CPU and workers > 1). Empty when there are no
// such parameters.
OptimizerRates MeasureOptimizerRates(const std::vector<at::Tensor>& params, c10::Device device, int steps,
                                     int workers, int threads);

}  // namespace mp
