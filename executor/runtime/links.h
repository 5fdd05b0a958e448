// Links: the in-process transport between neighbouring stages. forward[b]
// carries each micro-batch's values from stage b to b + 1, backward[b] their
// gradients from b + 1 to b, as Envelopes tagged with the micro-batch. A
// step sends M messages each way, so a capacity of M never blocks a sender.
// Closing them all ends every wait (a failure anywhere in the step).
// Between ranks, bridges (bridges.h) stand in for the far end of a channel.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>

#include <map>
#include <memory>
#include <vector>

#include "common/channel.h"
#include "planner/graph/cut.h"

namespace mp {

// Values by key, as they travel from stage to stage.
using Bundle = std::map<BoundaryValue, c10::IValue>;

// Forward: values; backward: each sent value's tensor gradients, in
// FlattenTensors order (undefined where none came).
struct Envelope {
  int microbatch = 0;
  Bundle values;
  std::map<BoundaryValue, std::vector<at::Tensor>> grads;
};

class Links {
 public:
  Links(int stages, int microbatches);
  Channel<Envelope>& Forward(int boundary) { return *forward_.at(boundary); }
  Channel<Envelope>& Backward(int boundary) { return *backward_.at(boundary); }
  void CloseAll();

 private:
  std::vector<std::unique_ptr<Channel<Envelope>>> forward_, backward_;
};

}  // namespace mp
