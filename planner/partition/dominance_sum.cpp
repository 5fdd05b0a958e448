// DominanceSum: a persistent segment tree over y, versions by x.
#include "planner/partition/dominance_sum.h"

#include <algorithm>

#include "common/error.h"

namespace mp {

DominanceSum::DominanceSum(int size, std::vector<Point> points) : size_(size), nodes_(1) {
  std::sort(points.begin(), points.end(), [](const Point& a, const Point& b) { return a.x < b.x; });
  roots_.assign(size_ + 1, 0);
  int depth = 1;  // nodes on a path from the root to a leaf
  while ((1 << (depth - 1)) < size_) ++depth;
  nodes_.reserve(1 + points.size() * size_t(depth));
  size_t next = 0;
  for (int x = 0; x <= size_; ++x) {
    int root = x > 0 ? roots_[x - 1] : 0;
    // roots_[x] holds the points with x' < x: add those at x - 1.
    while (x > 0 && next < points.size() && points[next].x < x) {
      const Point& p = points[next++];
      if (p.x < 0 || p.y < 0 || p.y >= size_) {
        throw InternalError(Concat("dominance sum: point (", p.x, ", ", p.y, ") outside [0, ", size_, ")"));
      }
      root = Insert(root, 0, size_ - 1, p.y, p.weight);
    }
    roots_[x] = root;
  }
  if (next != points.size()) throw InternalError(Concat("dominance sum: a point's x is beyond ", size_));
}

int DominanceSum::Insert(int node, int lo, int hi, int y, int64_t weight) {
  const int copy = int(nodes_.size());
  const Node from = nodes_[node];  // pushed by value: push_back may move what a reference points at
  nodes_.push_back(from);
  nodes_[copy].sum += weight;
  if (lo == hi) return copy;
  const int mid = lo + (hi - lo) / 2;
  if (y <= mid) {
    const int child = Insert(nodes_[node].left, lo, mid, y, weight);
    nodes_[copy].left = child;
  } else {
    const int child = Insert(nodes_[node].right, mid + 1, hi, y, weight);
    nodes_[copy].right = child;
  }
  return copy;
}

int64_t DominanceSum::Query(int node, int lo, int hi, int y_at_least) const {
  if (node == 0 || hi < y_at_least) return 0;
  if (lo >= y_at_least) return nodes_[node].sum;
  const int mid = lo + (hi - lo) / 2;
  return Query(nodes_[node].left, lo, mid, y_at_least) + Query(nodes_[node].right, mid + 1, hi, y_at_least);
}

int64_t DominanceSum::Sum(int x_below, int y_at_least) const {
  if (size_ <= 0 || roots_.empty()) return 0;
  x_below = std::clamp(x_below, 0, size_);
  return Query(roots_[x_below], 0, size_ - 1, y_at_least);
}

}  // namespace mp
