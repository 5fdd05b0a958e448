// A one-line progress bar on stderr for long steps (profiling a big
// model): done/total, percent and ETA. Silent unless enabled and stderr is
// a terminal, so logs and pipes never get carriage returns.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace mp {

class ProgressBar {
 public:
  ProgressBar(std::string label, std::string unit, bool enabled);
  ~ProgressBar();
  // Redraws at most ten times a second, and always for the last step.
  void Update(int64_t done, int64_t total);
  // Clears the line.
  void Finish();

 private:
  std::string label_, unit_;
  bool active_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

// "1m05s", "12s", "0.4s"
std::string FormatDuration(double seconds);

}  // namespace mp
