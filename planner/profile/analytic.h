// The analytic profile: per-node time on a device that is not here, from
// the node's FLOPs and bytes moved and the device profile's roofline.
#pragma once

#include "planner/graph/op_graph.h"
#include "planner/profile/device_profile.h"
#include "planner/profile/profile.h"

namespace mp {

// Peak FLOP/s `device` offers a node of `kind` computing in `dtype`, with
// PyTorch's defaults: float32 convolutions use TF32 tensor cores where the
// device has them (cudnn.allow_tf32), float32 matmuls do not
// (cuda.matmul.allow_tf32 is off); float16/bfloat16 use the tensor cores,
// and a precision the device lacks falls back to FP32.
double PeakFlopsFor(const DeviceProfile& device, const std::string& kind, const std::string& dtype);

// Copies `shapes` (a profile whose nodes carry flops and bytes_moved at
// each micro-batch size: measured, or a shapes-only pass) and replaces its
// times with the roofline estimate
//     forward = launch_overhead + max(flops / (peak * compute_efficiency),
//                                     bytes / (bandwidth * memory_efficiency))
// for nodes that compute or move data (view and bookkeeping nodes cost 0),
// and in training backward = the same with 2x flops and 2x bytes for
// nodes on the gradient path (floating outputs that depend on parameters).
// `graph` must have shapes (dtypes). Source "analytic", device = its name.
Profile AnalyticProfile(const Profile& shapes, const OpGraph& graph, const DeviceProfile& device);

// Fits `device`'s compute and memory efficiencies and launch overhead to a
// profile measured on that device: each efficiency is the ratio of the
// roofline time at peak to the measured time, summed over the nodes the
// roofline calls compute- (or memory-) bound, at the largest micro-batch.
DeviceProfile CalibrateDevice(const DeviceProfile& device, const Profile& measured, const OpGraph& graph);

}  // namespace mp
