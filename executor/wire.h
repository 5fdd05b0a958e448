// One message between pipeline stages in different processes, and how it
// travels over a ProcessGroup: one buffer with the pickled structure, the
// tensors' shapes and their bytes (CPU tensors: NCCL's device-to-device
// sends are not here yet), its sizes sent first or a stream's capacity.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
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
// laid out): its sizes, then its bytes. Throws Error naming the peer.
void SendMessage(ProcessGroup& group, int dst, int tag, const WireMessage& message);
WireMessage ReceiveMessage(ProcessGroup& group, int src, int tag);

// The messages of one channel between two ranks, kept across steps, one
// transfer each. Gloo's tcp transport sends at once only to a receive the
// peer has posted; otherwise it announces the send and waits for the peer
// to post it, a round trip through both processes' I/O threads. With its
// sizes sent first, every message's bytes took that round trip: the
// receiver posts their receive only once the sizes are in. Here both ends
// keep the size of the channel's largest message so far (its capacity): a
// receiver posts a receive of that size as soon as it waits for the next
// message, and each message goes as one transfer of it, a larger one after
// a transfer that announces the new size. The sender's end uses Send only,
// the receiver's Receive only, each from one thread.
class WireStream {
 public:
  WireStream(ProcessGroup& group, int peer, int tag);
  void Send(const WireMessage& message);
  WireMessage Receive();

 private:
  ProcessGroup& group_;
  int peer_, tag_;
  at::Tensor buffer_;  // bytes, the capacity: what both ends transfer
};

// A rank's streams by (peer, tag), made on first use, alive as long as the
// process group.
class WireStreams {
 public:
  explicit WireStreams(ProcessGroup& group) : group_(group) {}
  WireStream& At(int peer, int tag);

 private:
  ProcessGroup& group_;
  std::mutex mutex_;
  std::map<std::pair<int, int>, std::unique_ptr<WireStream>> streams_;
};

}  // namespace mp
