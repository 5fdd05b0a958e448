// Thread affinity through pthread_setaffinity_np (Linux): see cpu_affinity.h.
#include "common/cpu_affinity.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace mp {
namespace {

std::vector<int> CpusIn(const cpu_set_t& set) {
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

bool SetThreadCpus(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus)
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

}  // namespace

const std::vector<int>& AllowedCpus() {
  // The process's cores, not a pinned thread's: read on first use, which
  // comes before any pin (every pin asks for these first).
  static const std::vector<int> allowed = [] {
    cpu_set_t set;
    CPU_ZERO(&set);
    return sched_getaffinity(0, sizeof set, &set) == 0 ? CpusIn(set) : std::vector<int>{};
  }();
  return allowed;
}

std::vector<int> ThisThreadCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return pthread_getaffinity_np(pthread_self(), sizeof set, &set) == 0 ? CpusIn(set) : std::vector<int>{};
}

bool PinningEnabled() {
  const char* value = std::getenv("MP_PIN_CPUS");
  return value && std::strcmp(value, "1") == 0;
}

std::vector<int> WorkerCpus(const std::vector<int>& allowed, int worker, int workers, int threads) {
  if (worker < 0 || worker >= workers || threads < 1) return {};
  if (int64_t(workers) * threads > int64_t(allowed.size())) return {};
  return std::vector<int>(allowed.begin() + int64_t(worker) * threads,
                          allowed.begin() + int64_t(worker + 1) * threads);
}

std::vector<int> WorkerCpus(int worker, int workers, int threads) {
  if (!PinningEnabled()) return {};
  return WorkerCpus(AllowedCpus(), worker, workers, threads);
}

std::vector<int> RankCpus(const std::vector<int>& allowed, int rank, int ranks) {
  const int cores = int(allowed.size());
  if (ranks < 2 || ranks > cores || rank < 0 || rank >= ranks) return {};
  const int share = cores / ranks, extra = cores % ranks;
  const int first = rank * share + std::min(rank, extra);
  return std::vector<int>(allowed.begin() + first, allowed.begin() + first + share + (rank < extra ? 1 : 0));
}

std::vector<int> RankCpus(int rank, int ranks) {
  if (!PinningEnabled()) return {};
  return RankCpus(AllowedCpus(), rank, ranks);
}

ScopedPin::ScopedPin(const std::vector<int>& cpus) {
  if (cpus.empty()) return;
  AllowedCpus();
  before_ = ThisThreadCpus();
  if (!SetThreadCpus(cpus)) before_.clear();
}

ScopedPin::~ScopedPin() {
  if (!before_.empty()) SetThreadCpus(before_);
}

bool PinThisThread(const std::vector<int>& cpus) {
  if (cpus.empty()) return false;
  AllowedCpus();
  return SetThreadCpus(cpus);
}

std::string CpuList(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace mp
