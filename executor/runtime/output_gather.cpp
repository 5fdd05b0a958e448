// GatherOutputs: (stage, micro-batch, output index, value) tuples to the
// replica's first rank, then each replica's joined outputs to rank 0.
#include "executor/runtime/output_gather.h"

#include "common/error.h"
#include "executor/microbatches.h"
#include "executor/process_group.h"
#include "executor/runtime/wire_tags.h"
#include "executor/wire.h"
#include "planner/graph/run_graph.h"

namespace mp {
namespace {

using Made = std::vector<std::vector<std::map<size_t, c10::IValue>>>;

// The replica's first rank receives what its other ranks' stages made; the
// others send theirs. False on a rank that sent.
bool GatherReplica(const Distribution& dist, Made& made, int leader) {
  const int rank = dist.group->rank();
  try {
    if (rank != leader) {
      WireMessage message;
      for (size_t s = 0; s < made.size(); ++s) {
        for (size_t mb = 0; mb < made[s].size(); ++mb) {
          for (const auto& [k, value] : made[s][mb]) {
            message.values.push_back(
                c10::ivalue::Tuple::create({int64_t(s), int64_t(mb), int64_t(k), value}));
          }
        }
      }
      dist.streams->At(leader, kOutputsTag).Send(message);
      return false;
    }
    for (int r = leader + 1; r < leader + dist.ranks_per_replica; ++r) {
      for (const c10::IValue& item : dist.streams->At(r, kOutputsTag).Receive().values) {
        const auto& t = item.toTupleRef().elements();
        made.at(t[0].toInt()).at(t[1].toInt()).emplace(size_t(t[2].toInt()), t[3]);
      }
    }
  } catch (const std::exception& e) {
    throw Error(Concat("gathering the outputs on rank ", leader, ": ", ErrorLine(e.what())));
  }
  return true;
}

// Each micro-batch's outputs, from the stage that made each (or the
// graph's constant), joined along their batch dimensions.
std::vector<c10::IValue> JoinMade(const LoadedPlan& loaded, const Made& made) {
  const auto& keys = loaded.layout.output_keys;
  const int M = loaded.plan.microbatches;
  std::vector<std::vector<c10::IValue>> results(M, std::vector<c10::IValue>(keys.size()));
  for (int mb = 0; mb < M; ++mb) {
    for (size_t k = 0; k < keys.size(); ++k) {
      bool found = false;
      for (size_t s = 0; s < made.size() && !found; ++s) {
        auto it = made[s][mb].find(k);
        if (it != made[s][mb].end()) results[mb][k] = it->second, found = true;
      }
      if (found) continue;
      if (auto constant = torch::jit::toIValue(keys[k].value)) {
        results[mb][k] = *constant;
      } else {
        throw InternalError(Concat("no stage produced model output ", k, " for micro-batch ", mb));
      }
    }
  }
  return JoinMicrobatches(results, loaded.output_layout);
}

}  // namespace

std::vector<c10::IValue> GatherOutputs(const LoadedPlan& loaded, const Distribution* dist, Made made) {
  if (dist && !GatherReplica(*dist, made, dist->replica * dist->ranks_per_replica)) return {};
  std::vector<c10::IValue> outputs = JoinMade(loaded, made);
  if (!dist || dist->replicas == 1) return outputs;
  try {
    if (dist->group->rank() != 0) {
      WireMessage message;
      message.values = std::move(outputs);
      dist->streams->At(0, kReplicaOutputsTag).Send(message);
      return {};
    }
    std::vector<std::vector<c10::IValue>> replicas = {std::move(outputs)};
    for (int r = 1; r < dist->replicas; ++r) {
      replicas.push_back(dist->streams->At(r * dist->ranks_per_replica, kReplicaOutputsTag).Receive().values);
    }
    return JoinMicrobatches(replicas, loaded.output_layout);
  } catch (const InputError&) {
    throw;  // an output that cannot be joined says so itself
  } catch (const std::exception& e) {
    throw Error(Concat("gathering the replicas' outputs on rank 0: ", ErrorLine(e.what())));
  }
}

}  // namespace mp
