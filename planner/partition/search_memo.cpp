// SearchMemo: order costs per micro-batch size, DP tables per size and
// stage times.
#include "planner/partition/search_memo.h"

#include <utility>

#include "planner/partition/baselines.h"

namespace mp {
namespace {

// Stages whose memory cannot bind take the same time on the same range.
bool SameTimes(const StageSpec& a, const StageSpec& b) {
  return a.speed == b.speed && a.in_link == b.in_link && a.out_link == b.out_link && a.recompute == b.recompute;
}

// The table of the entry that `matches`, of at least `stages` stages: a
// shorter one is rebuilt larger (its shorter suffixes are the same), a
// missing one added. `build(stages)` makes a table.
template <typename Entry, typename Matches, typename Build>
const auto& AtLeast(std::vector<Entry>& entries, int stages, Entry key, Matches matches, Build build) {
  Entry* at = nullptr;
  for (Entry& e : entries) {
    if (matches(e)) at = &e;
  }
  if (!at) at = &entries.emplace_back(std::move(key));
  if (!at->table || at->stages < stages) {
    at->stages = stages;
    at->table = build(stages);
  }
  return *at->table;
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
  return AtLeast(
      tables_, stages, Built{&base.Costs(), timed, 0, nullptr},
      [&](const Built& b) { return b.costs == &base.Costs() && SameTimes(b.spec, timed); },
      [&](int k) { return std::make_unique<BottleneckDp>(base.WithStages(std::vector<StageSpec>(size_t(k), timed))); });
}

const MinMaxTable& SearchMemo::Params(const StageCostModel& model, int stages) {
  return AtLeast(
      params_, stages, BuiltParams{&model.Costs(), 0, nullptr},
      [&](const BuiltParams& b) { return b.costs == &model.Costs(); },
      [&](int k) { return std::make_unique<MinMaxTable>(ParamTable(model, k)); });
}

void SearchMemo::Clear() {
  params_.clear();
  tables_.clear();
  costs_.clear();
}

}  // namespace mp
