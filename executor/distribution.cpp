// StageOwners, GatherRuns, GatherState: small messages to rank 0 over the
// same wire as the pipeline's, on tags of their own.
#include "executor/distribution.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <map>

#include "common/error.h"
#include "planner/graph/run_graph.h"
#include "executor/wire.h"

namespace mp {
namespace {

constexpr int kRunsTag = (1 << 20) + 1;
constexpr int kStateTag = (1 << 20) + 2;

c10::IValue Pack(const PipelineRun& run, const Distribution& dist, int rank) {
  std::vector<c10::IValue> stages;
  for (size_t s = 0; s < run.busy_ms.size(); ++s) {
    if (dist.owner.at(s) != rank) continue;
    std::vector<c10::IValue> events;
    for (const ActionEvent& e : run.events[s]) {
      events.push_back(c10::ivalue::Tuple::create(
          {int64_t(e.kind), int64_t(e.microbatch), c10::ivalue::Tuple::create({e.start_ms, e.end_ms})}));
    }
    stages.push_back(c10::ivalue::Tuple::create({int64_t(s), run.busy_ms[s], c10::ivalue::Tuple::create(events)}));
  }
  // Tuples of at most 3: GCC 12 misreads IValue's inline tuple storage past that (-Warray-bounds).
  return c10::ivalue::Tuple::create({c10::ivalue::Tuple::create({run.start_ns, run.step_ms}),
                                     c10::ivalue::Tuple::create({run.loss, run.peak_heap_bytes}),
                                     c10::ivalue::Tuple::create(stages)});
}

// Adds a rank's step to rank 0's: its stages' figures, on one clock. The
// merged step runs from the earliest start over the ranks to the latest end.
void Merge(const c10::IValue& packed, PipelineRun& run) {
  const auto& t = packed.toTupleRef().elements();
  const auto& times = t[0].toTupleRef().elements();
  const auto& sums = t[1].toTupleRef().elements();
  const int64_t start_ns = times[0].toInt();
  if (start_ns < run.start_ns) {  // this rank started first: it is the origin
    const double shift_ms = double(run.start_ns - start_ns) / 1e6;
    for (auto& events : run.events) {
      for (ActionEvent& e : events) e.start_ms += shift_ms, e.end_ms += shift_ms;
    }
    run.step_ms += shift_ms;
    run.start_ns = start_ns;
  }
  const double offset_ms = double(start_ns - run.start_ns) / 1e6;
  run.step_ms = std::max(run.step_ms, offset_ms + times[1].toDouble());
  run.loss += sums[0].toDouble();
  run.peak_heap_bytes = std::max(run.peak_heap_bytes, sums[1].toInt());
  for (const c10::IValue& stage : t[2].toTupleRef().elements()) {
    const auto& st = stage.toTupleRef().elements();
    const size_t s = size_t(st[0].toInt());
    run.busy_ms.at(s) = st[1].toDouble();
    run.events.at(s).clear();
    for (const c10::IValue& event : st[2].toTupleRef().elements()) {
      const auto& e = event.toTupleRef().elements();
      const auto& span = e[2].toTupleRef().elements();
      run.events[s].push_back({ActionKind(e[0].toInt()), int(e[1].toInt()), span[0].toDouble() + offset_ms,
                               span[1].toDouble() + offset_ms});
    }
  }
}

}  // namespace

std::vector<int> StageOwners(int stages, int world) {
  if (world > stages) {
    throw InputError(Concat("WORLD_SIZE=", world, ": the plan has ", stages, " stage", stages == 1 ? "" : "s",
                            ", so at most ", stages, " ranks can run it"));
  }
  std::vector<int> owner(stages);
  for (int s = 0; s < stages; ++s) owner[s] = int(int64_t(s) * world / stages);
  return owner;
}

void GatherRuns(ProcessGroup& group, const Distribution& dist, std::vector<PipelineRun>& runs) {
  try {
    if (group.rank() != 0) {
      WireMessage message;
      for (const PipelineRun& run : runs) message.values.push_back(Pack(run, dist, group.rank()));
      SendMessage(group, 0, kRunsTag, message);
      return;
    }
    for (int r = 1; r < group.size(); ++r) {
      const WireMessage message = ReceiveMessage(group, r, kRunsTag);
      if (message.values.size() != runs.size()) {
        throw InternalError(Concat("rank ", r, " ran ", message.values.size(), " steps, rank 0 ", runs.size()));
      }
      for (size_t i = 0; i < runs.size(); ++i) Merge(message.values[i], runs[i]);
    }
  } catch (const std::exception& e) {
    throw Error(Concat("gathering the measurements on rank 0: ", ErrorLine(e.what())));
  }
}

void GatherState(ProcessGroup& group, const Distribution& dist, const LoadedPlan& loaded) {
  const CanonicalGraph& canonical = loaded.canonical;
  const auto graph_inputs = canonical.graph->inputs();
  std::map<const torch::jit::Value*, size_t> param_index;
  for (size_t i = 0; i < canonical.params.size(); ++i) param_index[graph_inputs[canonical.num_model_inputs + i]] = i;
  std::vector<int> keeper(canonical.params.size(), -1);  // the rank of the first stage reading it
  for (size_t s = 0; s < loaded.stages.size(); ++s) {
    for (const BoundaryValue& key : loaded.stages[s].inputs) {
      auto it = param_index.find(key.value);
      if (it != param_index.end() && keeper[it->second] < 0) keeper[it->second] = dist.owner.at(s);
    }
  }
  try {
    if (group.rank() != 0) {
      WireMessage message;
      for (size_t i = 0; i < keeper.size(); ++i) {
        if (keeper[i] == group.rank()) {
          message.values.push_back(c10::ivalue::Tuple::create({int64_t(i), canonical.params[i].tensor.detach()}));
        }
      }
      SendMessage(group, 0, kStateTag, message);
      return;
    }
    at::NoGradGuard no_grad;
    for (int r = 1; r < group.size(); ++r) {
      for (const c10::IValue& item : ReceiveMessage(group, r, kStateTag).values) {
        const auto& t = item.toTupleRef().elements();
        canonical.params.at(size_t(t[0].toInt())).tensor.copy_(t[1].toTensor());
      }
    }
  } catch (const std::exception& e) {
    throw Error(Concat("gathering the trained state on rank 0: ", ErrorLine(e.what())));
  }
}

}  // namespace mp
