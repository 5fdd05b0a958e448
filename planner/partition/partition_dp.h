// The optimal contiguous partition of a pipeline order into stages: the
// smallest bottleneck (largest StageMs over the stages) among partitions
// where every stage fits its device's memory and holds a node that costs
// time. Exact; see partition_dp.cpp for the method.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "planner/partition/stage_cost.h"

namespace mp {

struct DpSolution {
  bool feasible = false;
  double bottleneck_ms = 0;  // max over stages of StageMs
  std::vector<int> bounds;   // stages + 1 positions: 0 = b0 < b1 < ... < bK = n
};

// A suffix DP's answers: the best for the whole order over the last j
// stages (first[j]) and, for every start a, the end of the first of those
// j stages (next[j * (positions + 1) + a]).
struct DpTable {
  int positions = 0;
  std::vector<double> first;
  std::vector<int> next;
};

// Solves the model's K stages and, in the same pass, every shorter suffix of
// them: Solve(j) partitions the whole order over the model's last j stage
// specs. For identical devices and links (in-flight counts that depend only
// on the number of stages left, as gpipe's, 1f1b's and forward's do) that
// is the answer for j stages, so one table serves every K of a search.
class BottleneckDp {
 public:
  explicit BottleneckDp(const StageCostModel& model);
  DpSolution Solve(int stages) const;

 private:
  DpTable table_;
};

// The same for a cost of the range alone, alike on every stage and not
// decreasing with e, prefix[e] - prefix[a] (parameter bytes), memory
// ignored: Solve(j) for every j up to `stages` from one table (the params
// baseline's cut for each K of a search: PartitionMinMax per K was a
// quarter of a 96-block GPT's 64-device search).
class MinMaxTable {
 public:
  MinMaxTable(const StageCostModel& model, int stages, const std::vector<double>& prefix);
  DpSolution Solve(int stages) const;

 private:
  DpTable table_;
};

// Bottleneck-optimal partition into model.Stages() stages. Throws PlanError
// when no partition exists: fewer nodes that cost time than stages, or no
// partition that fits the devices' memory, naming the smallest per-device
// limit that would fit ("no partition into 2 stages fits 512 MiB per device;
// the smallest limit that fits is 1.31 GiB").
DpSolution PartitionDp(const StageCostModel& model);

// Min-max partition for any stage cost, ignoring memory limits: the engine
// behind SmallestMemoryLimit and the `params` baseline. `lower` bounds the
// cost from below and does not decrease with e for fixed (s, a); empty: the
// cost does not decrease with e (parameter bytes) and bounds itself.
DpSolution PartitionMinMax(const StageCostModel& model, const std::function<double(int s, int a, int e)>& cost,
                           const std::function<double(int s, int a, int e)>& lower = {});

// The smallest per-device memory limit under which a partition into
// model.Stages() stages exists (the min-max of MemoryBytes); -1 if none does.
int64_t SmallestMemoryLimit(const StageCostModel& model);

}  // namespace mp
