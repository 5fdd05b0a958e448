// The step probe: what a step of mpexec costs on this machine beyond its
// stages' actions. mpexec hands each device's action list to a thread of
// its pool (pinned to the worker's cores where MP_PIN_CPUS=1, its intra-op
// thread count set) and waits for all of them to return; waking a sleeping
// thread and being woken back takes tens of microseconds each on a VM. A
// one-stage plan of the zoo's toy model, predicted 0.06 ms, ran 0.26 ms a
// step, the ConvNet's 0.13-0.19 ms over its stage's busy time
// (docs/BENCHMARKS.md, issue 30). The planner adds it to every step it
// simulates on CPU workers.
#pragma once

#include <vector>

namespace mp {

// Median time, in ms, over `steps` steps (after a few discarded ones), of
// handing a job to each of k pool threads, each pinning itself as mpexec's
// worker w of k would and setting `threads` intra-op threads where a thread
// has another count (as mpexec's UseThreads: the first step), and joining them,
// for k = 1 .. workers: entry k - 1 for k workers. The calling thread
// spins for a millisecond between steps, as mpexec's does its optimizer
// step and the next step's set-up, so the pool's threads are asleep when
// woken.
std::vector<double> MeasureStepOverheadMs(int workers, int threads, int steps);

}  // namespace mp
