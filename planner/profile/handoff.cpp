#include "planner/profile/handoff.h"

#include <chrono>
#include <optional>
#include <thread>
#include <vector>

#include "common/channel.h"
#include "common/error.h"
#include "planner/profile/timer.h"

namespace mp {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kWarmup = 5;
// After each message the sender keeps its core busy this long, as a stage
// computes on after its send, and the receiver falls back asleep: a thread
// woken while its waker still runs is the case that costs (the scheduler
// may first queue it behind the waker), not a ping-pong's.
constexpr std::chrono::microseconds kBusy{1000};

}  // namespace

double MeasureHandoffMs(int messages) {
  if (messages < 1) throw InternalError(Concat("hand-off probe: ", messages, " messages"));
  Channel<Clock::time_point> channel(1);
  std::vector<double> one_way;
  one_way.reserve(size_t(kWarmup + messages));
  std::thread receiver([&] {
    while (std::optional<Clock::time_point> sent = channel.Receive()) {
      one_way.push_back(std::chrono::duration<double, std::milli>(Clock::now() - *sent).count());
    }
  });
  for (int i = 0; i < kWarmup + messages; ++i) {
    channel.Send(Clock::now());
    Spin(kBusy);
  }
  channel.Close();  // wakes the receiver's last Receive with nothing
  receiver.join();
  if (one_way.size() <= size_t(kWarmup)) throw InternalError("hand-off probe: messages were lost");
  one_way.erase(one_way.begin(), one_way.begin() + kWarmup);
  return Quantile(one_way, 0.5);
}

}  // namespace mp
