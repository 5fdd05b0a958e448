// Distribute, MakeStageGroups, GatherRuns, GatherState: small messages to
// rank 0 over the same wire as the pipeline's, on tags of their own.
#include "executor/distribution.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <map>

#include "common/error.h"
#include "planner/graph/run_graph.h"
#include "executor/runtime/wire_tags.h"
#include "executor/wire.h"

namespace mp {
namespace {


int64_t ReadyNs(const PipelineRun& run, size_t s) {
  return s < run.allreduce_ready_ns.size() ? run.allreduce_ready_ns[s] : 0;
}

c10::IValue Pack(const PipelineRun& run, const Distribution& dist, int rank) {
  std::vector<c10::IValue> stages, ready;
  for (size_t s = 0; s < run.busy_ms.size(); ++s) {
    if (dist.owner.at(s) != rank) continue;
    if (dist.replica != 0) {  // replica 0 speaks for the stages; the others say when they were ready
      if (ReadyNs(run, s) != 0) ready.push_back(c10::ivalue::Tuple::create({int64_t(s), ReadyNs(run, s)}));
      continue;
    }
    std::vector<c10::IValue> events;
    for (const TimedAction& e : run.events[s]) {
      events.push_back(c10::ivalue::Tuple::create(
          {int64_t(e.action.kind), int64_t(e.action.microbatch), c10::ivalue::Tuple::create({e.start_ms, e.end_ms})}));
    }
    const double allreduce = s < run.allreduce_ms.size() ? run.allreduce_ms[s] : 0.0;
    stages.push_back(c10::ivalue::Tuple::create(
        {int64_t(s), c10::ivalue::Tuple::create({run.busy_ms[s], allreduce, ReadyNs(run, s)}),
         c10::ivalue::Tuple::create(events)}));
  }
  // Tuples of at most 3: GCC 12 misreads IValue's inline tuple storage past that (-Warray-bounds).
  return c10::ivalue::Tuple::create(
      {c10::ivalue::Tuple::create({run.start_ns, run.step_ms}),
       c10::ivalue::Tuple::create({run.loss, run.peak_heap_bytes, c10::ivalue::Tuple::create(ready)}),
       c10::ivalue::Tuple::create(stages)});
}

// A replica's stage was ready at `ready_ns`: replica 0's all-reduce began
// no earlier, and what it measured before is its wait for that replica's
// backward, the step's imbalance and not the transfer the plan predicts
// (GPT's all-reduce read 2-5x its prediction with the wait in it).
void LaterReady(PipelineRun& run, size_t s, int64_t ready_ns) {
  if (s >= run.allreduce_ready_ns.size() || run.allreduce_ready_ns[s] == 0 || ready_ns <= run.allreduce_ready_ns[s]) {
    return;
  }
  run.allreduce_ms[s] = std::max(0.0, run.allreduce_ms[s] - double(ready_ns - run.allreduce_ready_ns[s]) / 1e6);
  run.allreduce_ready_ns[s] = ready_ns;
}

// Adds a rank's step to rank 0's: its stages' figures, on one clock, and
// its own step's time to rank 0's (GatherRuns averages them).
void Merge(const c10::IValue& packed, PipelineRun& run) {
  const auto& t = packed.toTupleRef().elements();
  const auto& times = t[0].toTupleRef().elements();
  const auto& sums = t[1].toTupleRef().elements();
  const int64_t start_ns = times[0].toInt();
  if (start_ns < run.start_ns) {  // this rank started first: it is the origin
    const double shift_ms = double(run.start_ns - start_ns) / 1e6;
    for (auto& events : run.events) {
      for (TimedAction& e : events) e.start_ms += shift_ms, e.end_ms += shift_ms;
    }
    run.start_ns = start_ns;
  }
  const double offset_ms = double(start_ns - run.start_ns) / 1e6;
  run.step_ms += times[1].toDouble();
  run.loss += sums[0].toDouble();
  run.peak_heap_bytes = std::max(run.peak_heap_bytes, sums[1].toInt());
  run.allreduce_ms.resize(run.busy_ms.size());
  run.allreduce_ready_ns.resize(run.busy_ms.size());
  // Another replica's readiness (its rank sends no stages): rank 0 merges
  // the ranks in order, so replica 0's figures for the stage are in by now.
  for (const c10::IValue& stage : sums[2].toTupleRef().elements()) {
    const auto& st = stage.toTupleRef().elements();
    LaterReady(run, size_t(st[0].toInt()), st[1].toInt());
  }
  for (const c10::IValue& stage : t[2].toTupleRef().elements()) {
    const auto& st = stage.toTupleRef().elements();
    const size_t s = size_t(st[0].toInt());
    const auto& times = st[1].toTupleRef().elements();
    run.busy_ms.at(s) = times[0].toDouble();
    run.allreduce_ms.at(s) = times[1].toDouble();
    run.allreduce_ready_ns.at(s) = times[2].toInt();
    run.events.at(s).clear();
    for (const c10::IValue& event : st[2].toTupleRef().elements()) {
      const auto& e = event.toTupleRef().elements();
      const auto& span = e[2].toTupleRef().elements();
      run.events[s].push_back({Action{int(s), ActionKind(e[0].toInt()), int(e[1].toInt())},
                               span[0].toDouble() + offset_ms, span[1].toDouble() + offset_ms});
    }
  }
}

}  // namespace

Distribution Distribute(const std::vector<int>& stage_program, int replicas, int rank, int world,
                        const std::string& world_given) {
  int programs = 0;
  for (int p : stage_program) programs = std::max(programs, p + 1);
  // Ranks per replica: at most one per device program (one per stage but
  // with several stages per device).
  const std::string noun = programs == int(stage_program.size()) ? " stage" : " device";
  const std::string plan = replicas > 1 ? Concat(replicas, " replicas of ", programs, noun, programs == 1 ? "" : "s")
                                        : Concat(programs, noun, programs == 1 ? "" : "s");
  if (world % replicas != 0) {
    throw InputError(Concat(world_given, ": the plan has ", plan, ", so the ranks must be a multiple of ",
                            replicas, " (", replicas, " x 1 to ", replicas, " x ", programs, ")"));
  }
  const int per_replica = world / replicas;
  if (per_replica > programs) {
    const int64_t most = int64_t(programs) * replicas;
    throw InputError(Concat(world_given, ": the plan has ", plan, ", so at most ", most,
                            most == 1 ? " rank can run it" : " ranks can run it"));
  }
  Distribution dist;
  dist.replica = rank / per_replica;
  dist.replicas = replicas;
  dist.ranks_per_replica = per_replica;
  dist.owner.resize(stage_program.size());
  for (size_t s = 0; s < stage_program.size(); ++s) {
    dist.owner[s] = dist.replica * per_replica + int(int64_t(stage_program[s]) * per_replica / programs);
  }
  return dist;
}

std::vector<std::unique_ptr<ProcessGroup>> MakeStageGroups(Distribution& dist) {
  std::vector<std::unique_ptr<ProcessGroup>> groups;
  if (dist.replicas <= 1) return groups;
  const int rank = dist.group->rank();
  for (size_t s = 0; s < dist.owner.size(); ++s) {
    if (dist.owner[s] != rank) continue;
    std::vector<int> members;  // the same place in every replica
    for (int r = 0; r < dist.replicas; ++r) members.push_back(rank + (r - dist.replica) * dist.ranks_per_replica);
    groups.push_back(dist.group->Subgroup(Concat("stage/", s), members));
    dist.stage_groups[int(s)] = groups.back().get();
  }
  return groups;
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
    // A step's time: the mean of the ranks' own (each from its start to its
    // end). The ranks begin a step as each ended the last, not together: a
    // rank that ended early begins early and waits within its step for the
    // others. From the earliest start to the latest end counted that skew
    // on top of the steps' pace (the ConvNet's 2 replicas: a median of 6.33
    // ms so, 5.44 from one step's earliest start to the next's), and so did
    // the longest rank's own (7.80 against 7.00: the rank that began early
    // changes from step to step). The mean over the steps of the ranks'
    // mean is the pace less what a rank does between two steps, as one
    // process's step is (since 2026-12-06).
    for (PipelineRun& run : runs) run.step_ms /= group.size();
  } catch (const std::exception& e) {
    throw Error(Concat("gathering the measurements on rank 0: ", ErrorLine(e.what())));
  }
}

void GatherState(ProcessGroup& group, const Distribution& dist, const LoadedPlan& loaded, Optimizer* optimizer,
                 std::vector<at::Tensor>* gradients) {
  const CanonicalGraph& canonical = loaded.canonical;
  std::vector<int> keeper;  // the rank of the first stage reading it (replica 0)
  for (int s : loaded.layout.first_user) keeper.push_back(s < 0 ? -1 : dist.owner.at(s));
  try {
    if (dist.replica != 0) return;
    if (group.rank() != 0) {
      WireMessage message;
      for (size_t i = 0; i < keeper.size(); ++i) {
        if (keeper[i] == group.rank()) {
          message.values.push_back(c10::ivalue::Tuple::create(
              {int64_t(i), canonical.params[i].tensor.detach(), optimizer ? optimizer->StateOf(i) : c10::IValue(),
               gradients ? c10::IValue(gradients->at(i)) : c10::IValue()}));
        }
      }
      SendMessage(group, 0, kStateTag, message);
      return;
    }
    at::NoGradGuard no_grad;
    for (int r = 1; r < dist.ranks_per_replica; ++r) {
      for (const c10::IValue& item : ReceiveMessage(group, r, kStateTag).values) {
        const auto& t = item.toTupleRef().elements();
        const size_t i = size_t(t[0].toInt());
        canonical.params.at(i).tensor.copy_(t[1].toTensor());
        if (optimizer) optimizer->SetState(i, t[2], canonical.params[i].tensor, Concat("rank ", r, "'s optimizer state"));
        if (gradients) gradients->at(i) = t[3].toTensor();
      }
    }
  } catch (const std::exception& e) {
    throw Error(Concat("gathering the trained state on rank 0: ", ErrorLine(e.what())));
  }
}

}  // namespace mp
