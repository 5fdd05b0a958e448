// Links: one forward and one backward channel per boundary.
#include "executor/runtime/links.h"

namespace mp {

Links::Links(int stages, int microbatches) {
  for (int b = 0; b + 1 < stages; ++b) {
    forward_.push_back(std::make_unique<Channel<Envelope>>(microbatches));
    backward_.push_back(std::make_unique<Channel<Envelope>>(microbatches));
  }
}

void Links::CloseAll() {
  for (auto& channel : forward_) channel->Close();
  for (auto& channel : backward_) channel->Close();
}

}  // namespace mp
