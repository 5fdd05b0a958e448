// The tags of every message between ranks, in one place so none collide:
// boundary b's values forward on 2b and gradients back on 2b + 1, then the
// end-of-step gathers on tags of their own above every boundary's.
#pragma once

namespace mp {

inline int ForwardTag(int boundary) { return 2 * boundary; }
inline int BackwardTag(int boundary) { return 2 * boundary + 1; }
constexpr int kOutputsTag = 1 << 20;              // a replica's outputs to its first rank
constexpr int kRunsTag = (1 << 20) + 1;           // measurements to rank 0
constexpr int kStateTag = (1 << 20) + 2;          // trained parameters to rank 0
constexpr int kReplicaOutputsTag = (1 << 20) + 3;  // each replica's outputs to rank 0

}  // namespace mp
