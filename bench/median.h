// The median the benches report: the middle of the sorted samples (the
// upper one of the two middles for an even count), 0 for none.
#pragma once

#include <algorithm>
#include <vector>

namespace mp::bench {

inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace mp::bench
