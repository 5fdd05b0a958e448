// SearchMemo: order costs per micro-batch size, DP tables per size and
// stage times.
#include "planner/partition/search_memo.h"

#include <algorithm>
#include <system_error>
#include <thread>
#include <utility>

#include "planner/partition/baselines.h"
#include "planner/partition/order.h"

namespace mp {
namespace {

// Stages whose memory cannot bind take the same time on the same range.
bool SameTimes(const StageSpec& a, const StageSpec& b) {
  return a.speed == b.speed && a.in_link == b.in_link && a.out_link == b.out_link && a.recompute == b.recompute;
}

// Whether an entry's table is made, or under way.
bool IsBuilt(const std::shared_ptr<const MinMaxTable>& table) { return table != nullptr; }
bool IsBuilt(const std::shared_future<std::shared_ptr<const BottleneckDp>>& table) { return table.valid(); }

// The entry that `matches`, its table of at least `stages` stages: a
// shorter one is rebuilt larger (its shorter suffixes are the same), a
// missing one added. `build(stages)` makes a table (or starts it); the
// entry's stage count changes only once it has (a thread that failed to
// start leaves the entry as it was).
template <typename Entry, typename Matches, typename Build>
Entry& AtLeast(std::vector<Entry>& entries, int stages, Entry key, Matches matches, Build build) {
  Entry* at = nullptr;
  for (Entry& e : entries) {
    if (matches(e)) at = &e;
  }
  if (!at) at = &entries.emplace_back(std::move(key));
  if (!IsBuilt(at->table) || at->stages < stages) {
    at->table = build(stages);
    at->stages = stages;
  }
  return *at;
}

// The params table reads the parameter bytes and which positions take time:
// the same at most micro-batch sizes (the 10,000-node chain's 15 sizes
// built it 15 times, a fifth of its search).
bool SameParamTable(const OrderCosts& a, const OrderCosts& b) {
  if (&a == &b) return true;
  if (a.order != b.order || a.param_bytes != b.param_bytes) return false;
  for (int p = 0; p < int(a.order.size()); ++p) {
    if (a.Useful(p) != b.Useful(p)) return false;
  }
  return true;
}

}  // namespace

const std::vector<int>& SearchMemo::Order(const OpGraph& graph) {
  if (!ordered_) order_ = PipelineOrder(graph), ordered_ = true;
  return order_;
}

StageCostModel SearchMemo::Model(const OrderCosts& costs, std::vector<StageSpec> stages,
                                 double optimizer_state_factor) {
  if (model_ && &model_->Costs() == &costs && model_->OptimizerStateFactor() == optimizer_state_factor) {
    return model_->WithStages(std::move(stages));
  }
  model_.emplace(costs, std::move(stages), optimizer_state_factor);
  return *model_;
}

std::shared_ptr<const OrderCosts> SearchMemo::Costs(const OpGraph& graph, const Profile& profile,
                                                    const std::vector<int>& order, int64_t size, bool training) {
  for (const Sized& s : costs_) {
    if (s.size == size && s.training == training) return s.costs;
  }
  auto costs = std::make_shared<const OrderCosts>(ComputeOrderCosts(graph, profile, order, size, training));
  costs_.push_back({size, training, costs});
  return costs;
}

SearchMemo::Built& SearchMemo::TableEntry(const StageCostModel& base, const StageSpec& spec, int stages,
                                          std::launch how) {
  // Times alone: where memory cannot bind, every range fits and auto
  // recomputes nothing, as never.
  StageSpec timed = spec;
  timed.memory_bytes = kUnlimitedMemory;
  if (timed.recompute == Recompute::kAuto) timed.recompute = Recompute::kNever;
  return AtLeast(
      tables_, stages, Built{&base.Costs(), timed, 0, {}},
      [&](const Built& b) { return b.costs == &base.Costs() && SameTimes(b.spec, timed); },
      [&](int k) {
        // The model (sharing base's sums, read-only) travels with the task;
        // the costs it points at are costs_, which outlive tables_.
        return std::async(how, [model = base.WithStages(std::vector<StageSpec>(size_t(k), timed))] {
                 return std::make_shared<const BottleneckDp>(model);
               }).share();
      });
}

const BottleneckDp& SearchMemo::Table(const StageCostModel& base, const StageSpec& spec, int stages) {
  return *TableEntry(base, spec, stages, std::launch::deferred).table.get();
}

void SearchMemo::Prefetch(const StageCostModel& base, const StageSpec& spec, int stages) {
  // A table of fewer states takes less than starting a thread would save
  // (a fifth of a millisecond; a zoo model's take microseconds).
  constexpr int64_t kWorthAThread = 10000;
  if (int64_t(base.Positions()) * stages < kWorthAThread || std::thread::hardware_concurrency() < 2) return;
  try {
    TableEntry(base, spec, stages, std::launch::async);
  } catch (const std::system_error&) {
    // No thread to be had: Table builds it when asked.
  }
}

const MinMaxTable& SearchMemo::Params(const StageCostModel& model, int stages) {
  const OrderCosts* costs = &model.Costs();
  const auto mine = [&](const BuiltParams& b) { return b.costs == costs; };
  if (std::none_of(params_.begin(), params_.end(), mine)) {
    for (size_t i = 0; i < params_.size(); ++i) {
      if (SameParamTable(*params_[i].costs, *costs)) {
        BuiltParams shared = params_[i];  // another size's table serves this one
        shared.costs = costs;
        params_.push_back(std::move(shared));
        break;
      }
    }
  }
  return *AtLeast(params_, stages, BuiltParams{costs, 0, nullptr}, mine,
                  [&](int k) { return std::make_shared<const MinMaxTable>(ParamTable(model, k)); })
              .table;
}

std::shared_ptr<const SearchMemo::Lists> SearchMemo::ListsOf(ScheduleKind kind, int devices, int microbatches,
                                                             int chunks) {
  constexpr size_t kKept = 4;
  for (size_t i = 0; i < lists_.size(); ++i) {
    const Schedule& l = lists_[i]->schedule;
    if (l.kind == kind && l.Devices() == devices && l.microbatches == microbatches && l.stages == devices * chunks) {
      std::rotate(lists_.begin(), lists_.begin() + long(i), lists_.begin() + long(i) + 1);
      return lists_.front();
    }
  }
  Schedule schedule = BuildSchedule(kind, devices, microbatches, chunks);
  ReplayOrder order = OrderForReplay(schedule);
  lists_.insert(lists_.begin(), std::make_shared<const Lists>(Lists{std::move(schedule), std::move(order)}));
  if (lists_.size() > kKept) lists_.pop_back();
  return lists_.front();
}

void SearchMemo::Clear() {
  lists_.clear();
  params_.clear();
  tables_.clear();
  model_.reset();
  costs_.clear();
  order_.clear();
  ordered_ = false;
}

}  // namespace mp
