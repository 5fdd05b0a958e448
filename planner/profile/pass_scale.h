// PassScale: how far the sum of the nodes' medians falls short of what a
// whole pass of them takes. A node's time is the median of its samples;
// the noise of a CPU is one-sided (an interrupt or a slow stretch adds
// time, nothing takes it away), so each median sits below its node's
// mean, and a step, which pays every node's sample of the moment, runs
// near the sum of the means: the passes' own totals show it, their median
// above the sum of the medians in 21 of 24 sizes of the zoo, by up to 5%
// (docs/profile.md, "Pass scale"). The profiler scales every node's times
// by this factor. Plain values.
#pragma once

#include <vector>

namespace mp {

// The kept passes at one micro-batch size: each pass's total, whether its
// backward was split into I and W (timed on their own, so its total is
// compared with the split sum), and the sums of the nodes' medians: forward
// plus backward, and forward plus input plus weight backward.
struct SizePasses {
  std::vector<double> pass_ms;
  std::vector<bool> split;  // one per pass_ms
  double plain_sum = 0;
  double split_sum = 0;
};

// The median over every size's passes of (pass total / the sum of the
// medians it is made of), pooled so that one size's few passes do not set
// it, within [1 / kMaxPassScale, kMaxPassScale]: on a calm machine it read
// 0.95-1.05; beyond 10% the passes ran under a load that came and went (a
// profile of the MLP with a build on both cores read 1.40), which the
// band and the drift reference speak for, not this. 1 when there are
// fewer than 3 passes or a sum is not positive.
constexpr double kMaxPassScale = 1.1;
double PassScale(const std::vector<SizePasses>& sizes);

// Then, at each size, the whole graph's warm run (`whole_ms`, forward or
// backward) over the sum of the nodes' (`nodes_ms`): what a stage running
// its micro-batches back to back pays against the nodes timed alone, each
// after other sizes' work. The profile pass's cold caches and the per-node
// cost the node overhead does not take off come to most at small sizes:
// GPT's nodes at 2 samples summed to 21.3-22.1 ms where its whole graph ran
// 19.9-20.3 warm and a one-stage plan measured 12% under its prediction
// (docs/profile.md, "Coverage and whole scale"). Within [1 / kMaxWholeScale,
// kMaxWholeScale]; 1 where either is not positive.
constexpr double kMaxWholeScale = 1.4;
double WholeScale(double whole_ms, double nodes_ms);

}  // namespace mp
