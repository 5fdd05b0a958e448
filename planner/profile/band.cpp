#include "planner/profile/band.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "planner/profile/timer.h"

namespace mp {

Band SampleBand(const std::vector<double>& samples) {
  if (samples.size() < 3) return {};
  const double median = Quantile(samples, 0.5);
  if (!(median > 0)) return {};
  return {std::min(1.0, Quantile(samples, 0.25) / median), std::max(1.0, Quantile(samples, 0.75) / median)};
}

Band Scaled(const Band& band, double k) { return {std::max(0.05, 1 - k * (1 - band.low)), 1 + k * (band.high - 1)}; }

Band MedianBand(const Band& samples, int n) { return n < 1 ? samples : Scaled(samples, 2.383 / std::sqrt(double(n))); }

Band Combine(const Band& a, const Band& b) {
  return {std::max(0.05, 1 - std::hypot(1 - a.low, 1 - b.low)), 1 + std::hypot(a.high - 1, b.high - 1)};
}

bool Within(double ms, double predicted_ms, const Band& band) {
  return predicted_ms * band.low <= ms && ms <= predicted_ms * band.high;
}

}  // namespace mp
