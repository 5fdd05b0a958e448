// Which cores a CPU worker runs on. The cores of one machine need not run
// alike: on this project's 2-vCPU VM one ran the zoo LSTM's training step in
// 16 ms and the other in 29 ms, minutes on end (a cache-bound loop 1.3x, an
// ALU loop 1.05x). A worker the scheduler moves between them takes either
// speed, so the profiler and mpexec pin CPU worker w to the same cores
// (WorkerCpus), the profiler measures each worker's cores against worker
// 0's, where the node passes run, and the planner charges each device its
// own speed. MP_PIN_CPUS=0 turns pinning off (the tests run that way, since
// ctest runs two of them at once and their workers would share core 0).
#pragma once

#include <string>
#include <vector>

namespace mp {

// The cores this process may run on, read once (before any pinning).
const std::vector<int>& AllowedCpus();

// False when the environment says MP_PIN_CPUS=0.
bool PinningEnabled();

// The cores of worker `worker` of `workers`, each with `threads` intra-op
// threads: allowed[worker * threads, (worker + 1) * threads), where the
// workers' threads fit the allowed cores; empty where they do not (more
// threads than cores: the scheduler shares them) or pinning is off.
std::vector<int> WorkerCpus(const std::vector<int>& allowed, int worker, int workers, int threads);
std::vector<int> WorkerCpus(int worker, int workers, int threads);

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
