// Which cores a CPU worker runs on. The cores of one machine need not run
// alike: on this project's 2-vCPU VM one ran the zoo LSTM's training step in
// 16 ms and the other in 29 ms (a cache-bound loop 1.3x, an ALU loop 1.05x),
// and which one was fast changed every few seconds to minutes. With
// MP_PIN_CPUS=1 the profiler and mpexec pin CPU worker w to the same cores
// (WorkerCpus) and the profiler measures each worker's cores against worker
// 0's, where its node passes run. Off by default: pinned, a stage could not
// leave a core in its slow stretch, and the same plans ran 0-27% slower
// than left to the scheduler (docs/profile.md). mpexec's drift reference
// times each worker's cores either way (ScopedPin, between steps).
#pragma once

#include <string>
#include <vector>

namespace mp {

// The cores this process may run on, read once (before any pinning).
const std::vector<int>& AllowedCpus();

// The cores the calling thread may run on now (empty if unreadable).
std::vector<int> ThisThreadCpus();

// True when the environment says MP_PIN_CPUS=1.
bool PinningEnabled();

// The cores of worker `worker` of `workers`, each with `threads` intra-op
// threads: allowed[worker * threads, (worker + 1) * threads), where the
// workers' threads fit the allowed cores; empty where they do not (more
// threads than cores: the scheduler shares them). The second form: empty
// too where pinning is off (PinningEnabled).
std::vector<int> WorkerCpus(const std::vector<int>& allowed, int worker, int workers, int threads);
std::vector<int> WorkerCpus(int worker, int workers, int threads);

// The cores of local rank `rank` of `ranks` (mpexec's processes on this
// machine, or the profiler's probe threads that stand in for them): an
// equal share of `allowed`, contiguous, the first `allowed.size() % ranks`
// ranks one core more; empty for one rank or more ranks than cores. The
// second form: empty too where pinning is off (PinningEnabled). Pinned, a
// rank's every thread stays on its cores (Gloo's too), as its worker does.
std::vector<int> RankCpus(const std::vector<int>& allowed, int rank, int ranks);
std::vector<int> RankCpus(int rank, int ranks);

// Pins the calling thread to `cpus` for the scope and restores its cores
// after; empty `cpus` leaves it as it is. Threads it starts meanwhile (an
// OpenMP team) inherit the cores.
class ScopedPin {
 public:
  explicit ScopedPin(const std::vector<int>& cpus);
  ~ScopedPin();
  ScopedPin(const ScopedPin&) = delete;
  ScopedPin& operator=(const ScopedPin&) = delete;

 private:
  std::vector<int> before_;
};

// Pins the calling thread to `cpus` for good (empty: nothing). Returns
// whether it is pinned.
bool PinThisThread(const std::vector<int>& cpus);

// "0-1", "2", "0,2": the list as Linux's cpulist prints it.
std::string CpuList(const std::vector<int>& cpus);

}  // namespace mp
