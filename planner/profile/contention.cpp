#include "planner/profile/contention.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <mutex>
#include <string>
#include <thread>

#include "common/cpu_affinity.h"
#include "common/dump.h"
#include "common/error.h"
#include "common/sanitizer_build.h"
#include "planner/profile/timer.h"
#include "planner/profile/whole_graph.h"

namespace mp {

// One run of a copy: its forward and (training) backward, timed apart.
// Outside the anonymous namespace: SharedSlowdownProbe::Workers, a class
// of the header's, holds them.
struct RunTimes {
  double forward_ms = 0, backward_ms = 0;
  double Total() const { return forward_ms + backward_ms; }
};

namespace {

// Turns until they span this long, after the fewest asked for. Under a
// sanitizer the factor means nothing (as the link probe's figures, and
// the after-step probe's): the fewest, not a span of two or more workers
// in every measured plan of the sanitizer jobs' tests.
constexpr double kSpanMs = kUnderSanitizer ? 0 : 400;
constexpr int kMaxTurns = 40;

RunTimes RunOnce(WholeGraph& graph) {
  RunTimes times;
  times.forward_ms = graph.Forward();
  times.backward_ms = graph.Backward();
  return times;
}

std::vector<double> Totals(const std::vector<RunTimes>& runs) {
  std::vector<double> totals;
  for (const RunTimes& r : runs) totals.push_back(r.Total());
  return totals;
}

}  // namespace

// One thread per graph, kept for the probe's life: a thread made per turn
// starts on a cold allocator arena and its first runs paid for it. With
// MP_PIN_CPUS=1 thread w runs on CPU worker w's cores (WorkerCpus), as
// mpexec's worker w then does.
class SharedSlowdownProbe::Workers {
 public:
  Workers(std::vector<std::unique_ptr<WholeGraph>> graphs, int threads)
      : graphs_(std::move(graphs)), samples_(graphs_.size()), errors_(graphs_.size()) {
    for (size_t w = 0; w < graphs_.size(); ++w)
      threads_.emplace_back([this, w, threads] { Loop(static_cast<int>(w), threads); });
  }

  ~Workers() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }

  // One sample of each of the graphs [first, first + copies), all running
  // together, copy i starting `stagger_ms` * i / copies after the first.
  std::vector<RunTimes> RunCopies(int first, int copies, double stagger_ms = 0) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      first_ = first;
      copies_ = copies;
      stagger_ms_ = stagger_ms;
      ready_ = 0;
      started_ = 0;
      counted_ = 0;
      finished_ = 0;
      std::fill(errors_.begin(), errors_.end(), nullptr);
      ++generation_;
    }
    wake_.notify_all();
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return finished_ == copies_; });
    for (int w = first; w < first + copies; ++w)
      if (errors_[w]) std::rethrow_exception(errors_[w]);
    return std::vector<RunTimes>(samples_.begin() + first, samples_.begin() + first + copies);
  }

 private:
  void Loop(int w, int threads) {
    PinThisThread(WorkerCpus(w, int(graphs_.size()), threads));
    at::set_num_threads(threads);
    uint64_t seen = 0;
    for (;;) {
      int first = 0, copies = 0;
      double stagger_ms = 0;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        first = first_;
        copies = copies_;
        stagger_ms = stagger_ms_;
      }
      if (w < first || w >= first + copies) continue;
      ready_.fetch_add(1);
      while (ready_.load() < copies) std::this_thread::yield();  // start together
      if (stagger_ms > 0) {
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(stagger_ms * (w - first) / copies));
      }
      started_.fetch_add(1);
      bool counted = false;
      try {
        // A copy's sample is its first run that starts once every copy has
        // started; a copy that has its sample runs again, untimed, until
        // every copy has one.
        while (counted_.load() < copies) {
          const bool all_started = started_.load() == copies;
          const RunTimes times = RunOnce(*graphs_[w]);
          if (!counted && all_started) {
            samples_[w] = times;
            counted = true;
            counted_.fetch_add(1);
          }
        }
      } catch (...) {
        errors_[w] = std::current_exception();
        if (!counted) counted_.fetch_add(1);
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ++finished_;
      }
      done_.notify_one();
    }
  }

  std::vector<std::unique_ptr<WholeGraph>> graphs_;
  std::vector<RunTimes> samples_;
  std::vector<std::exception_ptr> errors_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  uint64_t generation_ = 0;
  int first_ = 0, copies_ = 0;
  double stagger_ms_ = 0;
  int finished_ = 0;
  bool stop_ = false;
  std::atomic<int> ready_{0}, started_{0}, counted_{0};
};

SharedSlowdownProbe::SharedSlowdownProbe(const CanonicalGraph& canonical,
                                         const std::vector<c10::IValue>& model_inputs, const PassOptions& options,
                                         int workers, int threads, double share)
    : count_(workers), share_(share), ratios_(std::max(workers, 1)), speed_ratios_(std::max(workers, 1)) {
  if (workers < 2 || threads < 1)
    throw InternalError(Concat("contention probe: workers ", workers, ", threads ", threads));
  std::vector<std::unique_ptr<WholeGraph>> graphs;
  for (int w = 0; w < workers; ++w) {
    // Each copy on its own inputs, in case the graph writes to them.
    std::vector<c10::IValue> inputs;
    for (const auto& v : model_inputs) inputs.push_back(MapTensors(v, [](const at::Tensor& t) { return t.clone(); }));
    graphs.push_back(std::make_unique<WholeGraph>(canonical, inputs, options));
  }
  workers_ = std::make_unique<Workers>(std::move(graphs), threads);
  pinned_ = !WorkerCpus(0, workers, threads).empty();
  start_ = std::chrono::steady_clock::now();
}

SharedSlowdownProbe::~SharedSlowdownProbe() = default;

void SharedSlowdownProbe::Turn() {
  const auto start = std::chrono::steady_clock::now();
  // Alone and together in the same turn, so a neighbour's load on this
  // shared machine falls on both sides of the ratio. Pinned workers also
  // run alone on each worker's own cores: its speed against worker 0's.
  // The graph alone after an untimed run of it: a turn comes after
  // passes of the profiler's, which left this copy's memory and caches
  // cold, where a copy's sample together is a run after another run.
  workers_->RunCopies(0, 1);
  const RunTimes first = workers_->RunCopies(0, 1)[0];
  std::vector<double> alone{first.Total()};
  for (int w = 1; pinned_ && w < count_; ++w) {
    alone.push_back(workers_->RunCopies(w, 1)[0].Total());
    speed_ratios_[w].push_back(alone[0] > 0 ? alone[w] / alone[0] : 1.0);
  }
  std::string dump;
  if (DumpRequested("probe")) {
    dump = "probe turn " + std::to_string(turns_ + 1) + ": alone";
    for (double ms : alone) dump += " " + std::to_string(ms);
  }
  for (int k = 2; k <= count_; ++k) {
    // Staggered by the time alone: in lockstep the copies ran the same ops
    // at the same moment, which a pipeline's stages never do (in 1F1B one
    // stage's forward runs beside the other's backward), and read 5-20%
    // more (docs/profile.md).
    const std::vector<RunTimes> runs = workers_->RunCopies(0, k, alone[0]);
    const std::vector<double> together = Totals(runs);
    ratios_[k - 1].push_back(alone[0] > 0 ? Quantile(together, 0.5) / alone[0] : 1.0);
    if (!dump.empty()) {
      // The forward and the backward apart (forward+backward): what runs
      // beside a stage may slow its two kinds of work unlike.
      dump += "; " + std::to_string(k) + " at once";
      for (const RunTimes& r : runs) dump += " " + std::to_string(r.forward_ms) + "+" + std::to_string(r.backward_ms);
      dump += " (alone " + std::to_string(first.forward_ms) + "+" + std::to_string(first.backward_ms) + ")";
    }
  }
  if (!dump.empty()) std::fprintf(stderr, "%s\n", dump.c_str());
  spent_ms_ += MsSince(start);
  ++turns_;
}

void SharedSlowdownProbe::MaybeTurn() {
  if (spent_ms_ < share_ * MsSince(start_)) Turn();
}

SharedSlowdown SharedSlowdownProbe::Finish(int min_turns) {
  // Small graphs take more turns: three turns of a 35 ms graph gave 1.02
  // and 1.37 in two runs minutes apart.
  while (turns_ < min_turns || (spent_ms_ < kSpanMs && turns_ < kMaxTurns)) Turn();
  SharedSlowdown result;
  result.factors.push_back(1.0);
  result.turns = turns_;
  std::vector<double> relative;
  for (int k = 2; k <= count_; ++k) {
    const double median = Quantile(ratios_[k - 1], 0.5);
    result.factors.push_back(std::max(1.0, median));
    for (double r : ratios_[k - 1]) relative.push_back(median > 0 ? r / median : 1.0);
  }
  // Pinned: the cores' speeds, the median over the turns, and their spread
  // in the band.
  if (pinned_) result.speeds.push_back(1.0);
  for (int w = 1; pinned_ && w < count_; ++w) {
    const double median = Quantile(speed_ratios_[w], 0.5);
    result.speeds.push_back(median);
    for (double r : speed_ratios_[w]) relative.push_back(median > 0 ? r / median : 1.0);
  }
  result.band = SampleBand(relative);
  return result;
}

}  // namespace mp
