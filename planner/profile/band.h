// Error bands: how far a prediction can be off because the profile it came
// from was measured on a noisy machine. A band is two factors around a
// prediction P, [low * P, high * P], taken from the profile's own samples:
// the spread of the profiling passes' totals (each pass runs every node
// once, so a slow stretch of the machine shows as a slow pass) and of the
// drift reference timed between them (docs/profile.md). Plain values.
#pragma once

#include <string>
#include <vector>

namespace mp {

struct Band {
  double low = 1;   // <= 1
  double high = 1;  // >= 1
  bool Empty() const { return low == 1 && high == 1; }
};

// [p25 / median, p75 / median] of `samples`: their spread, by quartiles
// so that a few samples from a slow stretch of the machine do not set it.
// Empty when there are fewer than 3 or their median is not positive.
Band SampleBand(const std::vector<double>& samples);

// The band's distances from 1 times k.
Band Scaled(const Band& band, double k);

// An 80% interval for the median of n samples whose quartile band is
// `samples`: for normal noise a quartile lies 0.674 sigma from the median,
// the median's standard error is 1.2533 sigma / sqrt(n), and 80% of it lies
// within 1.2816 standard errors, so each side is 2.383 / sqrt(n) times the
// quartile's distance.
Band MedianBand(const Band& samples, int n);

// Two independent sources of error: their distances from 1 add in
// quadrature on each side.
Band Combine(const Band& a, const Band& b);

// True when `ms` lies in [predicted * band.low, predicted * band.high].
bool Within(double ms, double predicted_ms, const Band& band);

}  // namespace mp
