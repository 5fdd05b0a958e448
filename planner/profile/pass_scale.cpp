#include "planner/profile/pass_scale.h"

#include <algorithm>

#include "planner/profile/timer.h"

namespace mp {

double PassScale(const std::vector<SizePasses>& sizes) {
  std::vector<double> ratios;
  for (const SizePasses& size : sizes) {
    for (size_t p = 0; p < size.pass_ms.size(); ++p) {
      const double sum = size.split.at(p) ? size.split_sum : size.plain_sum;
      if (!(sum > 0)) return 1;
      ratios.push_back(size.pass_ms[p] / sum);
    }
  }
  if (ratios.size() < 3) return 1;
  return std::clamp(Quantile(ratios, 0.5), 1 / kMaxPassScale, kMaxPassScale);
}

double WholeScale(double whole_ms, double nodes_ms) {
  if (!(whole_ms > 0) || !(nodes_ms > 0)) return 1;
  return std::clamp(whole_ms / nodes_ms, 1 / kMaxWholeScale, kMaxWholeScale);
}

}  // namespace mp
