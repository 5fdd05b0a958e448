// SearchMemo: order costs per micro-batch size, DP tables per size and
// stage times.
#include "planner/partition/search_memo.h"

#include "planner/partition/baselines.h"

namespace mp {
namespace {

// Stages whose memory cannot bind take the same time on the same range.
bool SameTimes(const StageSpec& a, const StageSpec& b) {
  return a.speed == b.speed && a.in_link == b.in_link && a.out_link == b.out_link && a.recompute == b.recompute;
}

}  // namespace

std::shared_ptr<const OrderCosts> SearchMemo::Costs(const OpGraph& graph, const Profile& profile,
                                                    const std::vector<int>& order, int64_t size, bool training) {
  for (const Sized& s : costs_) {
    if (s.size == size && s.training == training) return s.costs;
  }
  auto costs = std::make_shared<const OrderCosts>(ComputeOrderCosts(graph, profile, order, size, training));
  costs_.push_back({size, training, costs});
  return costs;
}

const BottleneckDp& SearchMemo::Table(const StageCostModel& base, const StageSpec& spec, int stages) {
  // Times alone: where memory cannot bind, every range fits and auto
  // recomputes nothing, as never.
  StageSpec timed = spec;
  timed.memory_bytes = kUnlimitedMemory;
  if (timed.recompute == Recompute::kAuto) timed.recompute = Recompute::kNever;
  const auto build = [&](Built& b) {
    b.stages = stages;
    b.table = std::make_unique<BottleneckDp>(base.WithStages(std::vector<StageSpec>(size_t(stages), timed)));
  };
  for (Built& b : tables_) {
    if (b.costs != &base.Costs() || !SameTimes(b.spec, timed)) continue;
    // More stages: a larger table, whose shorter suffixes are the same.
    if (b.stages < stages) build(b);
    return *b.table;
  }
  tables_.push_back({&base.Costs(), timed, 0, nullptr});
  build(tables_.back());
  return *tables_.back().table;
}

const MinMaxTable& SearchMemo::Params(const StageCostModel& model, int stages) {
  for (BuiltParams& b : params_) {
    if (b.costs != &model.Costs()) continue;
    if (b.stages < stages) b = {b.costs, stages, std::make_unique<MinMaxTable>(ParamTable(model, stages))};
    return *b.table;
  }
  params_.push_back({&model.Costs(), stages, std::make_unique<MinMaxTable>(ParamTable(model, stages))});
  return *params_.back().table;
}

void SearchMemo::Clear() {
  params_.clear();
  tables_.clear();
  costs_.clear();
}

}  // namespace mp
