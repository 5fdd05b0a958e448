// One message between pipeline stages in different processes, and how it
// travels over a ProcessGroup: its sizes, then one buffer with the pickled
// structure, the tensors' shapes and their bytes (CPU tensors: NCCL's
// device-to-device sends are not here yet).
#pragma once

#include <ATen/core/ivalue.h>

#include <cstdint>
#include <vector>

#include "executor/process_group.h"

namespace mp {

// Forward: a micro-batch's values, in the order both sides agree on (the
// boundary's keys). Backward: for each of those values, the gradients of
// its tensors (FlattenTensors order; undefined where none came).
struct WireMessage {
  int64_t microbatch = 0;
  std::vector<c10::IValue> values;
  std::vector<std::vector<at::Tensor>> grads;
};

// Sends / receives one message on channel `tag` (wire.cpp says how it is
// laid out). Throws Error naming the peer.
void SendMessage(ProcessGroup& group, int dst, int tag, const WireMessage& message);
WireMessage ReceiveMessage(ProcessGroup& group, int src, int tag);

}  // namespace mp
