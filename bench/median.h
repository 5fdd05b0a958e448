// The median the benches report: the middle of the sorted samples (the
// upper one of the two middles for an even count), 0 for none.
#pragma once

#include <algorithm>
#include <utility>
#include <vector>

namespace mp::bench {

inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The median of f(item) over the items (a bench's turns, say).
template <typename Item, typename F>
double MedianOver(const std::vector<Item>& items, F f) {
  std::vector<double> v;
  for (const Item& item : items) v.push_back(f(item));
  return Median(std::move(v));
}

}  // namespace mp::bench
