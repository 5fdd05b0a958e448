// Reading a Profile at any micro-batch size between the measured ones.
#include "planner/profile/profile.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace mp {

double InterpolateAt(const std::vector<int64_t>& sizes, const std::vector<double>& ys, int64_t m) {
  if (sizes.empty() || sizes.size() != ys.size())
    throw InternalError(Concat("profile: ", ys.size(), " values for ", sizes.size(), " sizes"));
  if (m < sizes.front() || m > sizes.back())
    throw PlanError(Concat("micro-batch size ", m, " is outside the profiled sizes [",
                           sizes.front(), ", ", sizes.back(), "]"));
  auto hi = std::lower_bound(sizes.begin(), sizes.end(), m);
  const size_t j = hi - sizes.begin();
  if (*hi == m) return ys[j];
  const size_t i = j - 1;
  const double t = double(m - sizes[i]) / double(sizes[j] - sizes[i]);
  return ys[i] + t * (ys[j] - ys[i]);
}

bool CanInterpolate(const Profile& profile, int64_t m) {
  return !profile.microbatch_sizes.empty() && m >= profile.microbatch_sizes.front() &&
         m <= profile.microbatch_sizes.back();
}

double ForwardMs(const Profile& profile, int node, int64_t microbatch) {
  return InterpolateAt(profile.microbatch_sizes, profile.nodes.at(node).forward_ms, microbatch);
}

double BackwardMs(const Profile& profile, int node, int64_t microbatch) {
  const auto& cost = profile.nodes.at(node);
  if (cost.backward_ms.empty()) return 0;
  return InterpolateAt(profile.microbatch_sizes, cost.backward_ms, microbatch);
}

double InputBackwardMs(const Profile& profile, int node, int64_t microbatch) {
  const auto& cost = profile.nodes.at(node);
  if (cost.input_backward_ms.empty()) {
    const double b = BackwardMs(profile, node, microbatch);
    return cost.param_bytes > 0 ? b / 2 : b;
  }
  return InterpolateAt(profile.microbatch_sizes, cost.input_backward_ms, microbatch);
}

double WeightBackwardMs(const Profile& profile, int node, int64_t microbatch) {
  const auto& cost = profile.nodes.at(node);
  if (cost.weight_backward_ms.empty()) return BackwardMs(profile, node, microbatch) - InputBackwardMs(profile, node, microbatch);
  return InterpolateAt(profile.microbatch_sizes, cost.weight_backward_ms, microbatch);
}

int64_t OutputBytes(const Profile& profile, int node, int64_t microbatch) {
  const auto& cost = profile.nodes.at(node);
  return cost.output_bytes_fixed + cost.output_bytes_per_sample * microbatch;
}

namespace {

int64_t BytesAt(const std::optional<ValueBytes>& bytes, int64_t microbatch) {
  return bytes ? std::max<int64_t>(0, bytes->fixed + bytes->per_sample * microbatch) : 0;
}

}  // namespace

int64_t KeptBytes(const Profile& profile, int node, int64_t microbatch) {
  return BytesAt(profile.nodes.at(node).kept, microbatch);
}

int64_t WeightKeptBytes(const Profile& profile, int node, int64_t microbatch) {
  return BytesAt(profile.nodes.at(node).weight_kept, microbatch);
}

namespace {

int64_t BytesAtSize(const Profile& profile, const std::vector<int64_t>& per_size, int64_t microbatch) {
  if (per_size.empty()) return -1;
  const std::vector<double> bytes(per_size.begin(), per_size.end());
  return std::llround(InterpolateAt(profile.microbatch_sizes, bytes, microbatch));
}

}  // namespace

int64_t ForwardWorkingBytes(const Profile& profile, int node, int64_t microbatch) {
  return BytesAtSize(profile, profile.nodes.at(node).forward_working_bytes, microbatch);
}

int64_t BackwardWorkingBytes(const Profile& profile, int node, int64_t microbatch) {
  return BytesAtSize(profile, profile.nodes.at(node).backward_working_bytes, microbatch);
}

double ProbedAllReduceMs(const Profile::ProbedLink& link, int64_t bytes) {
  const int64_t half = (bytes + 1) / 2;
  return 2 * (link.latency_ms + (link.bytes_per_s > 0 ? 1000.0 * double(half) / link.bytes_per_s : 0));
}

namespace {

// The expected largest of n standard normal samples: the integral of x
// times the density of their maximum, n phi(x) Phi(x)^(n - 1).
double ExpectedNormalMax(int n) {
  constexpr double kStep = 1e-3, kPi = 3.14159265358979323846;
  double sum = 0;
  for (double x = -8; x < 8; x += kStep) {
    const double phi = std::exp(-x * x / 2) / std::sqrt(2 * kPi);
    const double cdf = 0.5 * std::erfc(-x / std::sqrt(2.0));
    sum += x * n * phi * std::pow(cdf, n - 1) * kStep;
  }
  return sum;
}

}  // namespace

double ReplicaWaitShare(const Profile& profile, int replicas) {
  const Profile::AllReduceAfterStep& step = profile.allreduce_after_step;
  if (replicas < 2 || !(step.gap_ms > 0 && step.round_ms > 0)) return 0;
  // Two normal times of spread sigma are E|a - b| = 2 sigma / sqrt(pi)
  // apart, and the later is sigma / sqrt(pi) past their mean: half the gap.
  const double half_gap_share = step.gap_ms / 2 / step.round_ms;
  return half_gap_share * ExpectedNormalMax(replicas) / ExpectedNormalMax(2);
}

double AllReduceAfterStepFactor(const Profile& profile) {
  const Profile::AllReduceAfterStep& step = profile.allreduce_after_step;
  if (!step.Measured() || !profile.allreduce_link.Measured()) return 1;
  const double probed = ProbedAllReduceMs(profile.allreduce_link, step.bytes);
  // A step before the sum slows it and never speeds it: mpexec's sums ran
  // 11-57% over the probe's line in every turn measured (docs/BENCHMARKS.md,
  // twenty-first session). A reading below the line is the noise of the
  // few sums the probe times: the ConvNet's 248 KB read 0.54 ms after a
  // step where the line said 2.5 and mpexec's runs 0.7 to 4.0, and the
  // replicas it made look as fast as the pipeline measured 52% slower.
  return probed > 0 ? std::max(1.0, step.ms / probed) : 1;
}

std::vector<double> SharedSlowdownAt(const Profile& profile, int64_t microbatch, bool processes) {
  const auto& sizes = profile.shared_slowdown_sizes;
  const bool as_processes = processes && profile.process_slowdown_by_size.size() == sizes.size();
  const auto& rows = as_processes ? profile.process_slowdown_by_size : profile.shared_slowdown_by_size;
  if (sizes.empty() || rows.size() != sizes.size()) return profile.shared_slowdown;
  if (microbatch <= sizes.front()) return rows.front();
  if (microbatch >= sizes.back()) return rows.back();
  const size_t hi = std::upper_bound(sizes.begin(), sizes.end(), microbatch) - sizes.begin();
  // In the logarithm of the size: the ConvNet's factor at 1, 2, 4, 8 and
  // 16 samples read 1.92, 1.81, 1.47, 1.28 and 1.17; from the ends, a line
  // in log size gives 1.73, 1.55 and 1.36 between them, a line in the size
  // 1.87, 1.74 and 1.53. And the MLP's, flat from 1 to 128 samples but for
  // noise, read up to 1.6 at 1 sample in some profiles: a line in the size
  // carried a fifth of that reading to 32 samples (1.22 where 40 read
  // 1.12), one in log size 6% (1.15).
  const double t =
      std::log(double(microbatch) / double(sizes[hi - 1])) / std::log(double(sizes[hi]) / double(sizes[hi - 1]));
  std::vector<double> factors(std::min(rows[hi - 1].size(), rows[hi].size()));
  for (size_t k = 0; k < factors.size(); ++k) factors[k] = rows[hi - 1][k] + t * (rows[hi][k] - rows[hi - 1][k]);
  return factors;
}

Band RankingBand(const Profile& profile) { return MedianBand(profile.pass_band, std::max(1, profile.repeats)); }

Band PredictionBand(const Profile& profile, int stages) {
  Band band = Combine(RankingBand(profile), MedianBand(profile.reference_band, 1));
  if (stages > 1 && profile.shared_slowdown_turns > 0)
    band = Combine(band, MedianBand(profile.shared_slowdown_band, profile.shared_slowdown_turns));
  return band;
}

int64_t ValueBytesAt(const Profile& profile, int value, int64_t microbatch) {
  const auto& bytes = profile.values.at(value);
  return bytes.fixed + bytes.per_sample * microbatch;
}

double OptimizerMsPerMib(const Profile& profile, const std::string& optimizer) {
  const auto it = profile.optimizer_ms_per_mib.find(optimizer);
  return it == profile.optimizer_ms_per_mib.end() ? 0 : it->second;
}

std::string SizeList(const std::vector<int64_t>& sizes) {
  std::string out;
  for (int64_t s : sizes) out += (out.empty() ? "" : ",") + std::to_string(s);
  return out;
}

}  // namespace mp
