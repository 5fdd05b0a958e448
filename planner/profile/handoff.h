// The hand-off probe: what passing a micro-batch from one CPU-worker stage
// to the next costs on this machine. mpexec's stages are threads that meet
// in bounded channels; a stage waiting for its input sleeps, and the sender
// wakes it and computes on. Between threads of one process no bytes are
// copied, but waking a thread while its waker keeps the core busy takes
// tens of microseconds on a VM (a ping-pong, where the waker sleeps at
// once, measures a few), which a pipeline of small actions pays on every
// message. The planner charges it as the latency of links between CPU
// workers.
#pragma once

namespace mp {

// Median one-way time, in ms, from a sender queueing a message in a channel
// to a thread asleep in Receive holding it, over `messages` messages (after
// a few discarded ones), the sender busy for 1 ms after each.
double MeasureHandoffMs(int messages);

}  // namespace mp
