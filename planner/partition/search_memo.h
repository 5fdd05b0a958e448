// What SearchPlan works out per micro-batch size and may reuse: the order's
// costs, and the suffix DP table of identical stages (BottleneckDp). Where
// memory cannot bind, one table answers every stage count of every
// schedule, chunking and replica count that cuts stages of the same speed,
// link and recomputation: the plain and chunked schedules' tables, and each
// replica count's, were one table built up to five times over (a 96-block
// GPT for 64 devices: 11 replica-count-and-size searches, 5 sizes).
//
// A memo serves one graph and one profile: Clear it when the profile
// changes (SearchAtMeasuredSizes does, after measuring a size).
#pragma once

#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <vector>

#include "planner/graph/op_graph.h"
#include "planner/partition/cut_cost.h"
#include "planner/partition/partition_dp.h"
#include "planner/partition/stage_cost.h"
#include "planner/profile/profile.h"
#include "planner/schedule/replay_order.h"
#include "planner/schedule/schedule.h"

namespace mp {

class SearchMemo {
 public:
  // The graph's pipeline order (PipelineOrder), worked out once.
  const std::vector<int>& Order(const OpGraph& graph);
  // The order's costs at micro-batch `size`, worked out once per size.
  std::shared_ptr<const OrderCosts> Costs(const OpGraph& graph, const Profile& profile, const std::vector<int>& order,
                                          int64_t size, bool training);
  // A model of `costs` (from Costs) on `stages`, sharing its sums with the
  // last model asked of those costs (a search at one size after another,
  // as the search of each other schedule at the chosen shape is: its sums
  // were a twentieth of a 1,000-node DAG's search).
  StageCostModel Model(const OrderCosts& costs, std::vector<StageSpec> stages, double optimizer_state_factor);
  // A table over `base`'s order of at least `stages` stages, each one like
  // `spec`; the caller makes sure memory cannot bind `spec` (its times
  // alone decide: speed, in and out links, recomputation). `base`'s costs
  // must come from Costs.
  const BottleneckDp& Table(const StageCostModel& base, const StageSpec& spec, int stages);
  // Starts building that table on another thread, where the machine has a
  // core to spare, the table is large enough to be worth one (10,000
  // states: stages x positions) and no such table is built or under way;
  // Table then waits for it. The search asks for the next micro-batch
  // size's table while it weighs this size's alternatives (the tables were
  // a third of a 10,000-node chain's search over 64 devices).
  void Prefetch(const StageCostModel& base, const StageSpec& spec, int stages);
  // The params baseline's table (ParamTable) over `model`'s order, of at
  // least `stages` stages, one for every size whose parameters and
  // positions that take time are the same; `model`'s costs must come from
  // Costs.
  const MinMaxTable& Params(const StageCostModel& model, int stages);
  // The lists of a shape (BuildSchedule) and their OrderForReplay, for
  // PartitionStepTimes; the last few shapes asked for are kept (a search
  // simulates one shape's cuts, and which stages run B, one after another).
  struct Lists {
    Schedule schedule;
    ReplayOrder order;
  };
  std::shared_ptr<const Lists> ListsOf(ScheduleKind kind, int devices, int microbatches, int chunks);
  void Clear();

 private:
  struct Sized {
    int64_t size;
    bool training;
    std::shared_ptr<const OrderCosts> costs;
  };
  struct Built {
    const OrderCosts* costs;
    StageSpec spec;
    int stages;
    std::shared_future<std::shared_ptr<const BottleneckDp>> table;
  };
  // The entry of `base`'s costs and `spec`'s times, its table of at least
  // `stages` stages built (or under way) `how`.
  Built& TableEntry(const StageCostModel& base, const StageSpec& spec, int stages, std::launch how);
  struct BuiltParams {
    const OrderCosts* costs;
    int stages;
    std::shared_ptr<const MinMaxTable> table;  // shared by the sizes it serves
  };
  std::vector<int> order_;
  bool ordered_ = false;
  std::vector<Sized> costs_;
  std::optional<StageCostModel> model_;  // the last Model's
  std::vector<Built> tables_;  // after costs_: destroyed first, each waiting for its thread
  std::vector<BuiltParams> params_;
  std::vector<std::shared_ptr<const Lists>> lists_;  // the most recent first
};

}  // namespace mp
