// BridgeJobs: a send bridge drains a local channel onto the wire, a receive
// bridge fills one from it, M messages each.
#include "executor/runtime/bridges.h"

#include "common/error.h"
#include "executor/runtime/wire_tags.h"
#include "executor/wire.h"

namespace mp {
namespace {

WireMessage ToWire(Envelope envelope, const std::vector<BoundaryValue>& keys) {
  WireMessage message;
  message.microbatch = envelope.microbatch;
  for (const BoundaryValue& key : keys) {
    if (!envelope.values.empty()) message.values.push_back(std::move(envelope.values.at(key)));
    if (!envelope.grads.empty()) message.grads.push_back(std::move(envelope.grads.at(key)));
  }
  return message;
}

Envelope FromWire(WireMessage message, const std::vector<BoundaryValue>& keys) {
  if ((!message.values.empty() && message.values.size() != keys.size()) ||
      (!message.grads.empty() && message.grads.size() != keys.size())) {
    throw InternalError(Concat("a message of ", message.values.size(), " values and ", message.grads.size(),
                               " gradients for a boundary of ", keys.size()));
  }
  Envelope envelope{int(message.microbatch), {}, {}};
  for (size_t i = 0; i < message.values.size(); ++i) envelope.values.emplace(keys[i], std::move(message.values[i]));
  for (size_t i = 0; i < message.grads.size(); ++i) envelope.grads.emplace(keys[i], std::move(message.grads[i]));
  return envelope;
}

// `stage` is the local stage a failure is reported for.
void SendBridge(Channel<Envelope>& channel, WireStream& stream, const std::vector<BoundaryValue>& keys,
                int microbatches, int stage, Failure& failure) {
  int current = -1;
  try {
    for (int n = 0; n < microbatches; ++n) {
      std::optional<Envelope> envelope = channel.Receive();
      if (!envelope) return;
      current = envelope->microbatch;
      stream.Send(ToWire(std::move(*envelope), keys));
    }
  } catch (...) {
    failure.Record(stage, current, std::current_exception());
  }
}

void ReceiveBridge(Channel<Envelope>& channel, WireStream& stream, const std::vector<BoundaryValue>& keys,
                   int microbatches, int stage, Failure& failure) {
  int current = -1;
  try {
    for (int n = 0; n < microbatches; ++n) {
      Envelope envelope = FromWire(stream.Receive(), keys);
      current = envelope.microbatch;
      if (!channel.Send(std::move(envelope))) return;
    }
  } catch (...) {
    failure.Record(stage, current, std::current_exception());
  }
}

}  // namespace

std::vector<std::function<void()>> BridgeJobs(Links& links, const Distribution& dist,
                                              const std::vector<std::vector<BoundaryValue>>& boundary,
                                              int microbatches, bool training, Failure& failure) {
  std::vector<std::function<void()>> jobs;
  const int rank = dist.group->rank();
  for (int b = 0; b < int(boundary.size()); ++b) {
    const int here = dist.owner.at(b), there = dist.owner.at(b + 1);
    if (here == there || (here != rank && there != rank)) continue;
    const auto& keys = boundary[b];
    Channel<Envelope>* forward = &links.Forward(b);
    Channel<Envelope>* backward = &links.Backward(b);
    const int M = microbatches;
    const int peer = here == rank ? there : here;
    WireStream* ahead = &dist.streams->At(peer, ForwardTag(b));
    WireStream* back = &dist.streams->At(peer, BackwardTag(b));
    if (here == rank) {
      jobs.push_back([=, &keys, &failure] { SendBridge(*forward, *ahead, keys, M, b, failure); });
      if (training) jobs.push_back([=, &keys, &failure] { ReceiveBridge(*backward, *back, keys, M, b, failure); });
    } else {
      jobs.push_back([=, &keys, &failure] { ReceiveBridge(*forward, *ahead, keys, M, b + 1, failure); });
      if (training) jobs.push_back([=, &keys, &failure] { SendBridge(*backward, *back, keys, M, b + 1, failure); });
    }
  }
  return jobs;
}

}  // namespace mp
