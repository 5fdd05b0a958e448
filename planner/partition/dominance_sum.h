// Sums of weighted points (x, y) with x < X and y >= Y, for any (X, Y),
// in O(log n) per query after O(points log n) to build: a persistent
// segment tree over y, one version per prefix of x. The stage cost model
// asks it, per candidate stage [a, e), for the bytes of values born before
// a and read at e or later: what the stage receives and sends on unchanged
// (a relay), which it holds once, not as received and again as sent.
#pragma once

#include <cstdint>
#include <vector>

namespace mp {

class DominanceSum {
 public:
  struct Point {
    int x = 0;  // in [0, size)
    int y = 0;  // in [0, size)
    int64_t weight = 0;
  };
  DominanceSum() = default;
  DominanceSum(int size, std::vector<Point> points);
  // Sum of the weights of points with x < x_below and y >= y_at_least.
  int64_t Sum(int x_below, int y_at_least) const;

 private:
  struct Node {
    int left = 0, right = 0;  // children (0: the empty tree)
    int64_t sum = 0;
  };
  int Insert(int node, int lo, int hi, int y, int64_t weight);
  int64_t Query(int node, int lo, int hi, int y_at_least) const;
  int size_ = 0;
  std::vector<Node> nodes_;  // nodes_[0]: the empty tree
  std::vector<int> roots_;   // roots_[x]: the tree of the points with x' < x
};

}  // namespace mp
