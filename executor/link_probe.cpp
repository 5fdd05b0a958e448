// ProbeProcessLinks: two ranks as threads on one Gloo group; messages
// through bridge threads, then all-reduces, each at two sizes.
// ProbeAllReduceAfterStep: two ranks as processes, rank 1 forked, summing
// a step's gradients as mpexec does (SumGradients).
#include "executor/link_probe.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/channel.h"
#include "common/cpu_affinity.h"
#include "common/dump.h"
#include "common/error.h"
#include "common/forked_child.h"
#include "common/sanitizer_build.h"
#include "executor/gradient_sum.h"
#include "executor/process_group.h"
#include "executor/wire.h"
#include "planner/profile/timer.h"

namespace mp {
namespace {

using Clock = std::chrono::steady_clock;
using Stamps = std::vector<Clock::time_point>;

constexpr int kWarmup = 3;
// Under a sanitizer the figures mean nothing, and every byte sent is
// checked: 30 rounds were 38 s of a 41 s mpplan under TSan.
constexpr int kTimed = kUnderSanitizer ? 3 : 30;
constexpr int kRounds = kWarmup + kTimed;
constexpr std::chrono::microseconds kBusy{1000};  // a stage computing on after its send, or before its all-reduce
// 4 KiB and 4 MiB messages (boundaries carry 0.1 to a few MiB), 4 KiB and
// 16 MiB all-reduces (a model's gradients are MiBs to GiBs, and beyond the
// caches the sum slows: the MLP's 16 MiB ran 50% over a fit to 4 MiB).
constexpr std::array<int64_t, 2> kFloats = {1024, 1 << 20};
constexpr std::array<int64_t, 2> kReduceFloats = {1024, 1 << 22};
constexpr std::chrono::seconds kTimeout{20};

// What the two rank threads share: rank 0's worker stamps when it queues a
// message, rank 1's bridge when it holds it, and `held` tells rank 0 so.
struct Shared {
  std::array<Stamps, kFloats.size()> queued, arrived;
  std::array<std::array<Stamps, kFloats.size()>, 2> ready, done;  // all-reduce, by rank
  Channel<int> held{1};
};

// Rank 0 sends kRounds messages of `floats` floats to rank 1 as a stage
// does: its worker queues each to a bridge thread that sends it, and
// computes on. Rank 1's worker computes all along (in a pipeline the
// receiving stage is busy with another micro-batch as its next input
// comes), so its bridge and the transport's threads wait for a core as
// they do in mpexec; the message has arrived when rank 1's bridge holds it.
void Messages(ProcessGroup& group, int tag, int64_t floats, Stamps& queued, Stamps& arrived, Channel<int>& held) {
  WireStreams streams(group);
  WireStream& stream = streams.At(1 - group.rank(), tag);
  std::exception_ptr failed;
  if (group.rank() == 0) {
    const at::Tensor payload = at::ones({floats});
    Channel<WireMessage> to_bridge(1);
    std::thread bridge([&] {
      try {
        while (std::optional<WireMessage> m = to_bridge.Receive()) stream.Send(*m);
      } catch (...) {
        failed = std::current_exception();
        held.Close();
      }
    });
    for (int i = 0; i < kRounds; ++i) {
      WireMessage m;
      m.microbatch = i;
      m.values = {payload};
      queued.push_back(Clock::now());
      to_bridge.Send(std::move(m));
      Spin(kBusy);
      if (!held.Receive()) break;
    }
    to_bridge.Close();
    bridge.join();
  } else {
    std::atomic<bool> computing{true};
    std::thread worker([&] {
      while (computing) Spin(kBusy);
    });
    try {
      for (int i = 0; i < kRounds; ++i) {
        stream.Receive();
        arrived.push_back(Clock::now());
        held.Send(i);
      }
    } catch (...) {
      failed = std::current_exception();
      held.Close();
    }
    computing = false;
    worker.join();
  }
  if (failed) std::rethrow_exception(failed);
}

// One sum as mpexec makes a stage's (SyncGradients, through the same
// SumGradients): the gradients of `params` gathered into `kept`'s buffer,
// summed over the group and handed back as views of it, stamped from
// before the gather to after the views. Returns the buffer's bytes.
int64_t TimedSum(ProcessGroup& group, const std::vector<at::Tensor>& params, GatherBuffers& kept, Stamps& ready,
                 Stamps& done) {
  ready.push_back(Clock::now());
  const int64_t bytes = SumGradients(group, params, kept);
  done.push_back(Clock::now());
  return bytes;
}

// kRounds all-reduces of `floats` floats of gradients, each after
// computing kBusy. The gather is the all-reduce's too: a fresh 16 MiB
// buffer took 2 ms to fill, a tenth of the MLP's all-reduce, which read
// 27-53% over a probe without it. After the first round the gradients are
// written where the last sum left them, as mpexec's backward adds into them
// (ZeroIfKept), and the gather finds them in place.
void AllReduces(ProcessGroup& group, int64_t floats, Stamps& ready, Stamps& done) {
  constexpr int kParts = 4;
  std::vector<at::Tensor> params;
  for (int p = 0; p < kParts; ++p) params.push_back(at::zeros({floats / kParts}));
  GatherBuffers kept;
  for (int i = 0; i < kRounds; ++i) {
    for (const at::Tensor& p : params) {
      if (ZeroIfKept(kept, p)) {
        p.mutable_grad().fill_(1.0);
      } else {
        p.mutable_grad() = at::ones_like(p);
      }
    }
    Spin(kBusy);
    TimedSum(group, params, kept, ready, done);
  }
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Rounds [first, end) of two ranks' sums, each rank's from the later
// rank's readiness (when the sum can start) to its own end: two samples a
// round, in round order.
std::vector<double> FromLaterReady(const std::array<const Stamps*, 2>& ready, const std::array<const Stamps*, 2>& done,
                                   size_t first) {
  std::vector<double> ms;
  for (size_t i = first; i < ready[0]->size(); ++i) {
    const Clock::time_point last_ready = std::max(ready[0]->at(i), ready[1]->at(i));
    for (int r = 0; r < 2; ++r) ms.push_back(Ms(done[r]->at(i) - last_ready));
  }
  return ms;
}

// The timed rounds' middle mean (MiddleMean): what a pipeline pays per
// message on average, where a wait for a core comes to some messages and
// not others (the median flips between the two), without the rare stall.
double MeanMs(std::vector<double> all, int warmup) {
  all.erase(all.begin(), all.begin() + warmup);
  return MiddleMean(std::move(all));
}

// Latency and bandwidth through (small bytes, ms) and (large bytes, ms), a
// transfer taking `hops` hops of bytes / hops each (a ring all-reduce of
// two: two of half the bytes). A large size no slower: latency alone.
ProbedLink Fit(const std::array<int64_t, 2>& floats, double small_ms, double large_ms, int hops) {
  const double small = double(floats[0] * 4), large = double(floats[1] * 4);
  ProbedLink link;
  if (large_ms > small_ms) link.bytes_per_s = 1000.0 * (large - small) / (large_ms - small_ms);
  const double wire_ms = link.bytes_per_s > 0 ? 1000.0 * small / link.bytes_per_s : 0;
  link.latency_ms = std::max(small_ms - wire_ms, 0.0) / hops;
  return link;
}

// Runs `rank(group)` on two ranks of one Gloo group, rank 1 on a thread
// of its own, each on its rank's cores where pinning is on. Where one
// fails, `stop()` is called and the other's group aborted, so neither is
// left waiting on the other. Throws Error naming `what` and the first
// failure (the other's is its consequence).
template <typename Rank, typename Stop>
void TwoRanks(const char* what, Rank rank, Stop stop) {
  if (!ProcessGroupsAvailable()) throw Error("this build has no Gloo: stages cannot run as processes");
  const int port = FreePort();
  std::mutex mutex;  // guards the two below
  std::array<ProcessGroup*, 2> groups{};  // while each lives
  std::exception_ptr first_failure;
  // In rank r's catch block: recorded while r's group still lives (its
  // end closes its sockets, which the other rank would report first).
  auto fail = [&](int r) {
    stop();
    std::lock_guard<std::mutex> lock(mutex);
    groups[r] = nullptr;
    if (!first_failure) first_failure = std::current_exception();
    if (groups[1 - r]) groups[1 - r]->Abort();
  };
  auto run = [&](int r) {
    // On the cores mpexec's rank r has with MP_PIN_CPUS=1 (RankCpus),
    // before the group starts its threads, which inherit them.
    const ScopedPin pin(RankCpus(r, 2));
    try {
      RankEnv env;
      env.rank = r;
      env.world_size = 2;
      env.master_port = port;
      ProcessGroup group(env, kTimeout);
      {
        std::lock_guard<std::mutex> lock(mutex);
        groups[r] = &group;
      }
      try {
        rank(group);
      } catch (...) {
        fail(r);
        return;
      }
      std::lock_guard<std::mutex> lock(mutex);
      groups[r] = nullptr;
    } catch (...) {
      fail(r);
    }
  };
  std::thread one(run, 1);
  run(0);
  one.join();
  if (!first_failure) return;
  try {
    std::rethrow_exception(first_failure);
  } catch (const std::exception& e) {
    throw Error(Concat(what, " failed: ", ErrorLine(e.what())));
  }
}

// A rank's sums in the all-reduce after a step: the buffer's bytes, and
// each round's stamps before the gather and after the views.
struct RankSums {
  int64_t bytes = 0;
  Stamps ready, done;
};

// As text, to come back from a child process: bytes, rounds, then each
// round's two stamps in steady-clock ticks (CLOCK_MONOTONIC: one clock
// for every process of the machine).
std::string Write(const RankSums& sums) {
  std::ostringstream out;
  out << sums.bytes << " " << sums.ready.size();
  for (size_t i = 0; i < sums.ready.size(); ++i) {
    out << " " << sums.ready[i].time_since_epoch().count() << " " << sums.done.at(i).time_since_epoch().count();
  }
  return out.str();
}

RankSums ReadSums(const std::string& text) {
  std::istringstream in(text);
  RankSums sums;
  size_t rounds = 0;
  in >> sums.bytes >> rounds;
  for (size_t i = 0; i < rounds && in; ++i) {
    Clock::rep ready = 0, done = 0;
    in >> ready >> done;
    sums.ready.push_back(Clock::time_point(Clock::duration(ready)));
    sums.done.push_back(Clock::time_point(Clock::duration(done)));
  }
  if (!in) throw InternalError(Concat("a rank's sums came back unreadable: '", text.substr(0, 80), "'"));
  return sums;
}

// One rank of TwoProcesses: its result, or its failure's line and when it
// was caught, while its group still lived (the other rank, waiting on it,
// fails only once the group is gone: the earlier failure is the cause).
struct RankOutcome {
  bool ok = false;
  std::string text;
  Clock::rep failed_at = 0;
};

template <typename Rank>
RankOutcome RunRank(int r, int port, Rank& rank) {
  RankOutcome outcome;
  const auto failed = [&outcome](const char* what) {
    outcome.failed_at = Clock::now().time_since_epoch().count();
    outcome.text = ErrorLine(what);
  };
  try {
    const ScopedPin pin(RankCpus(r, 2));  // before the group starts its threads, which inherit it
    RankEnv env;
    env.rank = r;
    env.world_size = 2;
    env.master_port = port;
    ProcessGroup group(env, kTimeout);
    try {
      outcome.text = rank(group);
      outcome.ok = true;
    } catch (const std::exception& e) {
      failed(e.what());
    }
  } catch (const std::exception& e) {
    if (outcome.failed_at == 0) failed(e.what());
  }
  return outcome;
}

// Runs `rank(group)` (returning a string) on two ranks of one Gloo group,
// rank 0 in this process and rank 1 in a child forked from it
// (forked_child.h), each on its rank's cores where pinning is on, as
// mpexec's replicas run: two processes, not two threads of one. Returns
// the two ranks' strings; throws Error naming `what` and the earlier
// failure where either fails (the other's is its consequence).
template <typename Rank>
std::array<std::string, 2> TwoProcesses(const char* what, Rank rank) {
  if (!ProcessGroupsAvailable()) throw Error("this build has no Gloo: stages cannot run as processes");
  const int port = FreePort();
  ForkedChild child([&] {
    const RankOutcome outcome = RunRank(1, port, rank);
    return Concat(outcome.ok ? "ok " : "failed ", outcome.failed_at, "\n", outcome.text);
  });
  const RankOutcome mine = RunRank(0, port, rank);
  RankOutcome theirs;
  try {
    const std::string text = child.Wait(4 * kTimeout);
    const size_t space = text.find(' '), line = text.find('\n');
    theirs.ok = text.compare(0, space, "ok") == 0;
    theirs.failed_at = std::stoll(text.substr(space + 1, line - space - 1));
    theirs.text = text.substr(line + 1);
  } catch (const std::exception& e) {  // the child died, or did not end
    theirs.text = ErrorLine(e.what());
    theirs.failed_at = Clock::now().time_since_epoch().count();
  }
  if (mine.ok && theirs.ok) return {mine.text, theirs.text};
  const bool theirs_first = !theirs.ok && (mine.ok || theirs.failed_at < mine.failed_at);
  throw Error(Concat(what, " failed: ", theirs_first ? theirs.text : mine.text));
}

}  // namespace

ProbedLinks ProbeProcessLinks() {
  Shared shared;
  TwoRanks(
      "the link probe between two processes",
      [&](ProcessGroup& group) {
        const int r = group.rank();
        for (size_t s = 0; s < kFloats.size(); ++s) {
          Messages(group, int(s) + 1, kFloats[s], shared.queued[s], shared.arrived[s], shared.held);
        }
        for (size_t s = 0; s < kFloats.size(); ++s) {
          AllReduces(group, kReduceFloats[s], shared.ready[r][s], shared.done[r][s]);
        }
      },
      [&] { shared.held.Close(); });
  std::array<double, kFloats.size()> message_ms{}, allreduce_ms{};
  for (size_t s = 0; s < kFloats.size(); ++s) {
    std::vector<double> one_way;
    for (int i = 0; i < kRounds; ++i) one_way.push_back(Ms(shared.arrived[s].at(i) - shared.queued[s].at(i)));
    message_ms[s] = MeanMs(one_way, kWarmup);
    allreduce_ms[s] = MeanMs(FromLaterReady({&shared.ready[0][s], &shared.ready[1][s]},
                                            {&shared.done[0][s], &shared.done[1][s]}, 0),
                             2 * kWarmup);
  }
  return {Fit(kFloats, message_ms[0], message_ms[1], 1), Fit(kReduceFloats, allreduce_ms[0], allreduce_ms[1], 2)};
}

StepAllReduce ProbeAllReduceAfterStep(const std::function<std::vector<at::Tensor>(int rank)>& step, int warmup,
                                      int timed) {
  if (warmup < 0 || timed < 1) {
    throw InternalError(Concat("all-reduce after a step: ", warmup, " + ", timed, " rounds"));
  }
  const char* what = "the all-reduce after a step between two processes";
  const auto rank = [&](ProcessGroup& group) {
    GatherBuffers kept;
    std::vector<at::Tensor> params;  // the last round's
    RankSums sums;
    for (int i = 0; i < warmup + timed; ++i) {
      for (const at::Tensor& p : params) {  // as mpexec's ResetGradients
        if (!ZeroIfKept(kept, p)) p.mutable_grad() = at::Tensor();
      }
      params = step(group.rank());
      sums.bytes = TimedSum(group, params, kept, sums.ready, sums.done);
    }
    return sums;
  };
  std::array<RankSums, 2> sums;
  if (kUnderThreadSanitizer) {
    // A forked child may not start threads there (forked_child.h).
    TwoRanks(what, [&](ProcessGroup& group) { sums[group.rank()] = rank(group); }, [] {});
  } else {
    const std::array<std::string, 2> texts =
        TwoProcesses(what, [&](ProcessGroup& group) { return Write(rank(group)); });
    for (int r = 0; r < 2; ++r) sums[r] = ReadSums(texts[r]);
  }
  // The middle mean, as mpexec reports a sum's over its steps: the
  // ConvNet's 248 KB took 0.5-1 ms in most rounds and 3-6 in the rest, and
  // the median of a few rounds read 0.6 where mpexec's steps paid 1.5.
  const std::vector<double> rounds =
      FromLaterReady({&sums[0].ready, &sums[1].ready}, {&sums[0].done, &sums[1].done}, size_t(warmup));
  // How far rank 0's step ended after rank 1's (the earlier rank's wait for
  // the later), and each round from the later readiness to the next.
  std::vector<double> gaps, periods;
  for (size_t i = size_t(warmup); i < sums[0].ready.size(); ++i) {
    gaps.push_back(Ms(sums[0].ready[i] - sums[1].ready.at(i)));
    if (i == 0) continue;
    const auto later = [&](size_t round) { return std::max(sums[0].ready.at(round), sums[1].ready.at(round)); };
    periods.push_back(Ms(later(i) - later(i - 1)));
  }
  if (DumpRequested("allreduce")) {
    std::string line = "all-reduce after a step, " + std::to_string(sums[0].bytes) + " bytes, ms:";
    for (double ms : rounds) line += " " + std::to_string(ms);
    line += "; rank 0's step ended after rank 1's by, ms:";
    for (double ms : gaps) line += " " + std::to_string(ms);
    for (int r = 0; r < 2; ++r) {  // from its last sum's end to its readiness
      line += "; rank " + std::to_string(r) + "'s steps, ms:";
      for (size_t i = std::max<size_t>(size_t(warmup), 1); i < sums[r].ready.size(); ++i) {
        line += " " + std::to_string(Ms(sums[r].ready[i] - sums[r].done.at(i - 1)));
      }
    }
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  StepAllReduce result;
  result.bytes = sums[0].bytes;
  result.ms = MiddleMean(rounds);
  for (double& ms : gaps) ms = std::abs(ms);
  result.gap_ms = MiddleMean(gaps);
  if (!periods.empty()) result.round_ms = MiddleMean(periods);
  return result;
}

}  // namespace mp
