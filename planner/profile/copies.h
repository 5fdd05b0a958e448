// The copies of a model the contention probe (contention.h) runs at once,
// run as the stages they stand for run in mpexec: as threads of this
// process (a pipeline's stages) or as processes (data-parallel replicas,
// one process per device: process_copies.h). Two threads share their
// process's heap locks and page tables where two processes do not; the
// ConvNet's step ran 1.22-1.34x slower beside a copy of it on a thread,
// 1.04-1.15x beside one in a process (docs/profile.md).
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "planner/profile/whole_graph.h"

namespace mp {

// One run of a copy: its forward and (training) backward, timed apart.
struct RunTimes {
  double forward_ms = 0, backward_ms = 0;
  double Total() const { return forward_ms + backward_ms; }
};

// What the copies of one run share to start together and sample alike;
// lock-free, so that it works in memory that processes share. Reset before
// every run, while no copy is running.
struct CopySync {
  std::atomic<int> ready{0}, started{0}, counted{0};
  void Reset() {
    ready = 0;
    started = 0;
    counted = 0;
  }
  // `copies` that will not run (a copy that could not be built, or one
  // whose process died): counted ready, started and sampled, so that the
  // others wait neither for them nor for their samples.
  void Skip(int copies) {
    ready += copies;
    started += copies;
    counted += copies;
  }
};

// Copy `index` of `copies` in one run: waits until every copy is ready,
// starts `stagger_ms` * index / copies later, then runs the graph until
// every copy has its sample; its own is its first run to start once all
// have started, so every sample saw all of them at work. Where the graph
// throws, the copy counts itself sampled (the others do not wait for it)
// and rethrows.
RunTimes RunCopy(WholeGraph& graph, CopySync& sync, int index, int copies, double stagger_ms);

class Copies {
 public:
  virtual ~Copies() = default;
  // One sample of each of the copies [first, first + copies), all running
  // together, copy i starting `stagger_ms` * i / copies after the first.
  // Rethrows (or, from another process, throws Error with) the first
  // copy's failure, if one failed.
  virtual std::vector<RunTimes> Run(int first, int copies, double stagger_ms) = 0;
  virtual int Count() const = 0;
};

// One thread per graph, started at the first run and kept for the copies'
// life (a thread made per run started on a cold allocator arena, and its
// first runs paid for it), with
// `threads` intra-op threads each; with MP_PIN_CPUS=1 thread w runs on CPU
// worker w's cores (WorkerCpus), as mpexec's worker w then does.
std::unique_ptr<Copies> CopiesOnThreads(std::vector<std::unique_ptr<WholeGraph>> graphs, int threads);

}  // namespace mp
