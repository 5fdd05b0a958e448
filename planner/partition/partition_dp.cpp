// Exact min-max partition of a sequence into contiguous stages, the
// formulation of PipeDream (Narayanan et al., SOSP 2019, section 3.1: the
// slowest stage bounds pipeline throughput; stage time = compute plus its
// communication) and of Alpa's inter-operator pass (Zheng et al., OSDI 2022,
// section 5.2: minimise the max stage latency over contiguous slices of a
// linearised graph, with per-mesh memory limits), on an ordered list of
// possibly different devices.
//
// The DP runs over suffixes: V[j][a] = min over e of max(V[j-1][e], C(a, e)),
// the best bottleneck for positions [a, n) on the last j stages. Plain, that
// is O(K n^2); here each (j, a) looks at few ends e, exactly:
//   - C(a, e) >= L(e) = speed * work(a, e) + in(a), which grows with e;
//   - V[j-1][e] >= P(e) = min over e' <= e of V[j-1][e'], which shrinks with e;
//   - memory nearly grows with e (what a stage sends and keeps may shrink
//     as e passes its last reader), so the ends up to the last that fits
//     are searched (binary search) and one that does not fit costs +inf.
// The cost at e is at least max(L(e), P(e)), a valley: binary-search its
// bottom e*, scan up while L(e) < best and down while P(e) < best. Every end
// skipped has a lower bound >= best, so the result is exact; on balanced
// sequences a few ends per state are read: O(K n log n) in practice.
#include "planner/partition/partition_dp.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/byte_size.h"
#include "common/error.h"

namespace mp {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The first e in [lo, end) where pred turns true (pred is false, then true),
// or end: gallops from `hint` in whichever direction, then bisects.
template <typename Pred>
int FirstTrue(int lo, int end, int hint, Pred pred) {
  int left = lo, right = end;  // the answer lies in [left, right]
  if (hint >= lo && hint < end) {
    if (pred(hint)) {
      right = hint;
      for (int step = 1;; step *= 2) {
        const int probe = right - step;
        if (probe < lo) break;
        if (!pred(probe)) {
          left = probe + 1;
          break;
        }
        right = probe;
      }
    } else {
      left = hint + 1;
      for (int step = 1;; step *= 2) {
        const int probe = left + step - 1;
        if (probe >= end) break;
        if (pred(probe)) {
          right = probe;
          break;
        }
        left = probe + 1;
      }
    }
  }
  while (left < right) {
    const int mid = left + (right - left) / 2;
    if (pred(mid)) {
      right = mid;
    } else {
      left = mid + 1;
    }
  }
  return left;
}

// Fills `out` for j = 1..K, for any stage cost with a lower bound
// nondecreasing in e and a feasible-end limit max_end(s, a), stage s = K - j.
template <typename Lower, typename Cost, typename MaxEnd>
void SolveSuffixes(const StageCostModel& m, int K, Lower lower, Cost cost, MaxEnd max_end, DpTable& out) {
  const int n = m.Positions();
  const size_t row = size_t(n) + 1;
  out.positions = n;
  out.first.assign(K + 1, kInf);
  out.next.assign((K + 1) * row, -1);
  std::vector<double> prev(row, kInf), value(row, kInf);
  for (int a = 0; a < n; ++a) {
    if (m.FirstUsefulEnd(a) <= n && max_end(K - 1, a) >= n) {
      value[a] = cost(K - 1, a, n);
      out.next[row + a] = n;
    }
  }
  if (K >= 1) out.first[1] = value[0];
  std::vector<double> prefix_min(row);
  for (int j = 2; j <= K; ++j) {
    const int s = K - j;
    prev.swap(value);
    std::fill(value.begin(), value.end(), kInf);
    int* next = &out.next[j * row];
    int last_finite = -1;
    for (int e = 0; e <= n; ++e) {
      prefix_min[e] = std::min(prev[e], e > 0 ? prefix_min[e - 1] : kInf);
      if (prev[e] < kInf) last_finite = e;
    }
    int hint = 0;
    for (int a = 0; a < n; ++a) {
      const int lo = m.FirstUsefulEnd(a);
      const int hi = std::min(max_end(s, a), last_finite);
      if (lo > hi) continue;
      // First e with lower(e) >= prefix_min(e); the previous start's answer is a good hint.
      const int left = FirstTrue(lo, hi + 1, hint, [&](int e) { return lower(s, a, e) >= prefix_min[e]; });
      hint = left;
      double best = kInf;
      int arg = -1;
      auto consider = [&](int e) {
        const double v = std::max(prev[e], cost(s, a, e));
        if (v < best) {
          best = v;
          arg = e;
        }
      };
      for (int e = left; e <= hi && lower(s, a, e) < best; ++e) consider(e);
      for (int e = left - 1; e >= lo && prefix_min[e] < best; --e) consider(e);
      value[a] = best;
      next[a] = arg;
    }
    out.first[j] = value[0];
  }
}

// An e <= n such that [a, e) fits stage s, the largest where memory grows
// with e (binary search); a if none.
int MaxFittingEnd(const StageCostModel& m, int s, int a) {
  const int n = m.Positions();
  if (!m.MemoryCanBind(s)) return n;
  int left = a, right = n;  // invariant: [a, left) fits (trivially for left = a)
  while (left < right) {
    const int mid = (left + right + 1) / 2;
    if (m.Fits(s, a, mid)) {
      left = mid;
    } else {
      right = mid - 1;
    }
  }
  return left;
}

DpSolution Extract(const DpTable& table, int stages) {
  DpSolution solution;
  if (stages < 1 || stages >= int(table.first.size()) || !(table.first[stages] < kInf)) return solution;
  solution.feasible = true;
  solution.bottleneck_ms = table.first[stages];
  solution.bounds.push_back(0);
  const size_t row = size_t(table.positions) + 1;
  int a = 0;
  for (int j = stages; j >= 1; --j) {
    a = table.next[j * row + a];
    solution.bounds.push_back(a);
  }
  return solution;
}

// Stages alike in their times whose memory cannot bind and that never
// recompute (SearchMemo's tables): a range's cost is its compute and the
// transfers over its two cuts, read from arrays (the calls for each cut's
// transfers were a third of a 10,000-node chain's tables).
bool AlikeInTime(const StageCostModel& m) {
  for (int s = 0; s < m.Stages(); ++s) {
    const StageSpec& a = m.Spec(s);
    const StageSpec& b = m.Spec(0);
    if (m.MemoryCanBind(s) || a.recompute == Recompute::kAlways || a.speed != b.speed || !(a.in_link == b.in_link) ||
        !(a.out_link == b.out_link)) {
      return false;
    }
  }
  return true;
}

}  // namespace

BottleneckDp::BottleneckDp(const StageCostModel& untabulated) {
  const StageCostModel model = untabulated.WithTransferTables();
  const int n = model.Positions();
  const auto unbound = [&](int, int) { return n; };
  if (model.Stages() > 0 && AlikeInTime(model)) {
    std::vector<double> in(size_t(n) + 1), out(size_t(n) + 1);
    for (int c = 0; c <= n; ++c) in[c] = model.InMs(0, c), out[c] = model.OutMs(0, c);
    // As StageMs adds them: compute, in, out (recomputation: none); read
    // through locals the table's stores cannot alias (the tables' share of
    // the 10,000-node chain's search went from 29% to 25%).
    const double speed = model.Spec(0).speed;
    const double* work = model.WorkSums();
    const double* in_ms = in.data();
    const double* out_ms = out.data();
    const auto lower = [speed, work, in_ms](int, int a, int e) { return speed * (work[e] - work[a]) + in_ms[a]; };
    SolveSuffixes(
        model, model.Stages(), lower, [lower, out_ms](int, int a, int e) { return lower(0, a, e) + out_ms[e]; },
        unbound, table_);
    return;
  }
  SolveSuffixes(
      model, model.Stages(), [&](int s, int a, int e) { return model.ComputeMs(s, a, e) + model.InMs(s, a); },
      [&](int s, int a, int e) { return model.Fits(s, a, e) ? model.StageMs(s, a, e) : kInf; },
      [&](int s, int a) { return MaxFittingEnd(model, s, a); }, table_);
}

DpSolution BottleneckDp::Solve(int stages) const { return Extract(table_, stages); }

MinMaxTable::MinMaxTable(const StageCostModel& model, int stages, const std::vector<double>& prefix) {
  const auto at = [&](int, int a, int e) { return prefix[e] - prefix[a]; };
  SolveSuffixes(model, stages, at, at, [&](int, int) { return model.Positions(); }, table_);
}

DpSolution MinMaxTable::Solve(int stages) const { return Extract(table_, stages); }

DpSolution PartitionMinMax(const StageCostModel& model, const std::function<double(int s, int a, int e)>& cost,
                           const std::function<double(int s, int a, int e)>& lower) {
  DpTable table;
  SolveSuffixes(model, model.Stages(), lower ? lower : cost, cost, [&](int, int) { return model.Positions(); }, table);
  return Extract(table, model.Stages());
}

int64_t SmallestMemoryLimit(const StageCostModel& model) {
  const DpSolution s =
      PartitionMinMax(model, [&](int s, int a, int e) { return double(model.LeastMemoryBytes(s, a, e)); },
                      [&](int s, int a, int e) { return double(model.MemoryLowerBound(s, a, e)); });
  return s.feasible ? int64_t(s.bottleneck_ms) : -1;
}

DpSolution PartitionDp(const StageCostModel& model) {
  const int K = model.Stages();
  if (model.UsefulNodes() < K) {
    throw PlanError(Concat("cannot cut into ", K, " stages: only ", model.UsefulNodes(),
                           " nodes take time (each stage needs one)"));
  }
  DpSolution solution = BottleneckDp(model).Solve(K);
  if (solution.feasible) return solution;
  // In the user's terms: each device's --memory, before its headroom and
  // its division among interleaved chunks.
  bool same = true;
  std::string limits;
  for (int s = 0; s < K; ++s) {
    same = same && model.Spec(s).device_memory_bytes == model.Spec(0).device_memory_bytes;
    limits += Concat(s ? ", " : "", FormatBytes(model.Spec(s).device_memory_bytes));
  }
  const StageSpec& first = model.Spec(0);
  const int64_t smallest = SmallestMemoryLimit(model);
  const double to_device = double(first.device_memory_bytes) / double(std::max<int64_t>(1, first.memory_bytes));
  const std::string headroom =
      first.memory_headroom > 0 ? Concat(" (less its ", first.memory_headroom * 100, "% headroom)") : "";
  throw PlanError(Concat("no partition into ", K, " stages fits ",
                         same ? FormatBytes(first.device_memory_bytes) + " per device" + headroom
                              : "the devices' memory (" + limits + ")" + headroom,
                         "; the smallest limit that fits is ", FormatBytes(int64_t(std::ceil(smallest * to_device))),
                         same ? "" : " per device"));
}

}  // namespace mp
