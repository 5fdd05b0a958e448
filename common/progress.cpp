// ProgressBar: carriage-return redraws, throttled; ETA from the mean rate
// so far (profiling steps are similar in cost within one model).
#include "common/progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace mp {

std::string FormatDuration(double seconds) {
  char text[32];
  if (seconds < 10) {
    std::snprintf(text, sizeof text, "%.1fs", seconds);
  } else if (seconds < 60) {
    std::snprintf(text, sizeof text, "%.0fs", seconds);
  } else {
    const long s = std::lround(seconds);
    std::snprintf(text, sizeof text, "%ldm%02lds", s / 60, s % 60);
  }
  return text;
}

ProgressBar::ProgressBar(std::string label, std::string unit, bool enabled)
    : label_(std::move(label)), unit_(std::move(unit)), active_(enabled && ::isatty(STDERR_FILENO)),
      start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

ProgressBar::~ProgressBar() { Finish(); }

void ProgressBar::Update(int64_t done, int64_t total) {
  if (!active_ || total <= 0) return;
  const auto now = std::chrono::steady_clock::now();
  if (done < total && drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  drawn_ = true;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double fraction = double(done) / double(total);
  const int width = 30;
  const int filled = static_cast<int>(fraction * width);
  std::string bar(filled, '#');
  bar.resize(width, '.');
  const std::string eta = done > 0 ? FormatDuration(elapsed / fraction - elapsed) : "?";
  std::fprintf(stderr, "\r%s [%s] %lld/%lld %s  %3.0f%%  ETA %s   ", label_.c_str(), bar.c_str(),
               static_cast<long long>(done), static_cast<long long>(total), unit_.c_str(), 100 * fraction,
               eta.c_str());
  std::fflush(stderr);
}

void ProgressBar::Finish() {
  if (!active_ || !drawn_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace mp
