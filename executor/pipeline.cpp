// RunInference. Values travel as bundles (value -> IValue) from stage s to
// s + 1: what s received plus what it made, pruned to what a later stage
// reads, so a value needed two stages on is relayed, as the plan's
// neighbour-only SEND/RECV actions require. Stage 0 starts each micro-batch's
// bundle from its slice of the model inputs; parameters never travel, each
// stage holds its own. Model outputs are collected per micro-batch from
// whichever stage makes them and joined in micro-batch order at the end.
#include "executor/pipeline.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "common/error.h"
#include "executor/channel.h"
#include "planner/graph/run_graph.h"

namespace mp {
namespace {

using Bundle = std::map<BoundaryValue, c10::IValue>;

struct Envelope {
  int microbatch = 0;
  Bundle values;
};

// The first failure of the run, and the switch that stops every worker.
class Failure {
 public:
  explicit Failure(std::vector<std::unique_ptr<Channel<Envelope>>>& channels) : channels_(channels) {}

  void Record(int stage, int microbatch, const std::string& what) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (message_.empty()) message_ = Concat("stage ", stage, ", micro-batch ", microbatch, ": ", ErrorLine(what));
    }
    for (auto& channel : channels_) channel->Close();
  }
  const std::string& What() const { return message_; }

 private:
  std::vector<std::unique_ptr<Channel<Envelope>>>& channels_;
  std::mutex mutex_;
  std::string message_;
};

// Joins one output across micro-batches; `next` walks the output tensors in
// FlattenTensors order, which is the order of `batch_dims`.
c10::IValue Join(const std::vector<c10::IValue>& parts, const std::vector<int>& batch_dims, size_t& next, size_t k) {
  const c10::IValue& first = parts.front();
  if (first.isTensor()) {
    const int dim = next < batch_dims.size() ? batch_dims[next] : -1;
    ++next;
    std::vector<at::Tensor> tensors;
    for (const auto& p : parts) tensors.push_back(p.toTensor());
    if (tensors.size() == 1) return tensors.front();
    if (dim < 0 || dim >= tensors.front().dim()) {
      throw InputError(Concat("model output ", k, ": no dimension grows with the batch; cannot join its micro-batches"));
    }
    return at::cat(tensors, dim);
  }
  if (first.isTuple()) {
    std::vector<c10::IValue> joined;
    for (size_t i = 0; i < first.toTupleRef().elements().size(); ++i) {
      std::vector<c10::IValue> column;
      for (const auto& p : parts) column.push_back(p.toTupleRef().elements()[i]);
      joined.push_back(Join(column, batch_dims, next, k));
    }
    return c10::ivalue::Tuple::create(std::move(joined));
  }
  if (parts.size() == 1) return first;
  throw InputError(Concat("model output ", k, " is a ", first.tagKind(), ": only tensors and tuples of them are joined"));
}

}  // namespace

std::vector<std::vector<c10::IValue>> SplitMicrobatches(const Plan& plan, const std::vector<c10::IValue>& inputs) {
  std::vector<std::vector<c10::IValue>> out(plan.microbatches);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].isTensor()) {
      for (auto& mb : out) mb.push_back(inputs[i]);
      continue;
    }
    const int dim = i < plan.inputs.size() ? plan.inputs[i].batch_dim : 0;
    const at::Tensor& t = inputs[i].toTensor();
    if (t.dim() <= dim || t.size(dim) != plan.batch) {
      throw InputError(Concat("input ", i, ": expected ", plan.batch, " samples along dimension ", dim, ", found shape ",
                              t.sizes()));
    }
    const auto parts = t.split(plan.microbatch_size, dim);
    for (int mb = 0; mb < plan.microbatches; ++mb) out[mb].push_back(parts[mb]);
  }
  return out;
}

std::vector<c10::IValue> JoinMicrobatches(const std::vector<std::vector<c10::IValue>>& outputs,
                                          const std::vector<int>& batch_dims) {
  std::vector<c10::IValue> joined;
  size_t next = 0;
  for (size_t k = 0; k < outputs.front().size(); ++k) {
    std::vector<c10::IValue> parts;
    for (const auto& mb : outputs) parts.push_back(mb[k]);
    joined.push_back(Join(parts, batch_dims, next, k));
  }
  return joined;
}

std::vector<int> OutputBatchDims(const CanonicalGraph& canonical, const std::vector<TensorSpec>& inputs) {
  std::vector<std::vector<at::Tensor>> probes;
  for (int64_t batch : {1, 2}) {
    std::vector<at::Tensor> flat;
    try {
      const auto outputs = GraphRunner(canonical.graph, "batch_probe")
                               .Run(canonical.Stack(SyntheticInputs(WithBatch(inputs, batch))));
      for (const auto& v : outputs) for (auto& t : FlattenTensors(v)) flat.push_back(t);
    } catch (const std::exception&) {
      return {};  // the model refuses a batch of 1 or 2: no output can be joined
    }
    probes.push_back(std::move(flat));
  }
  std::vector<int> dims;
  for (size_t i = 0; i < probes[0].size() && i < probes[1].size(); ++i) {
    const at::Tensor &one = probes[0][i], &two = probes[1][i];
    int dim = -1;
    if (one.dim() == two.dim()) {
      for (int64_t d = 0; d < one.dim(); ++d) {
        if (two.size(d) == 2 * one.size(d) && one.size(d) > 0) {
          dim = static_cast<int>(d);
          break;
        }
      }
    }
    dims.push_back(dim);
  }
  return dims;
}

PipelineRun RunInference(const LoadedPlan& loaded, const std::vector<c10::IValue>& model_inputs,
                         const PipelineOptions& options) {
  const Plan& plan = loaded.plan;
  const CanonicalGraph& canonical = loaded.canonical;
  if (plan.training) throw InputError("this mpexec runs inference plans only (mode: infer); training comes next");
  const int K = int(loaded.stages.size());
  const int M = plan.microbatches;
  const auto microbatches = SplitMicrobatches(plan, model_inputs);

  // Where each value comes from: parameters are held by every stage that
  // reads them; the model outputs are collected wherever they are made.
  const auto graph_inputs = canonical.graph->inputs();
  std::map<BoundaryValue, c10::IValue> params;
  for (size_t i = 0; i < canonical.params.size(); ++i) {
    params[{graph_inputs[canonical.num_model_inputs + i], 0}] = canonical.params[i].tensor;
  }
  std::vector<BoundaryValue> output_keys;
  for (const torch::jit::Value* out : canonical.graph->outputs()) {
    output_keys.push_back({out, canonical.mutation.FinalVersion(out)});
  }
  // needed_after[s]: what any stage after s reads. Model outputs are not
  // relayed: the stage that makes one hands it to the results directly.
  std::vector<std::set<BoundaryValue>> needed_after(K);
  for (int s = K - 2; s >= 0; --s) {
    needed_after[s] = needed_after[s + 1];
    for (const BoundaryValue& key : loaded.stages[s + 1].inputs) {
      if (!params.count(key)) needed_after[s].insert(key);
    }
  }

  std::vector<std::unique_ptr<Channel<Envelope>>> channels;  // channels[s]: s -> s + 1
  for (int s = 0; s + 1 < K; ++s) channels.push_back(std::make_unique<Channel<Envelope>>(M));
  Failure failure(channels);
  // made[s][mb]: the model outputs stage s made for micro-batch mb, by
  // output index; each worker writes only its own, so no lock is needed.
  std::vector<std::vector<std::map<size_t, c10::IValue>>> made(K, std::vector<std::map<size_t, c10::IValue>>(M));
  PipelineRun run;
  run.busy_ms.assign(K, 0);
  const int threads = options.threads_per_stage > 0 ? options.threads_per_stage : std::max(1, plan.profile.threads);

  const auto worker = [&](int s) {
    int current = -1;
    try {
      at::set_num_threads(threads);
      const StageGraph& stage = loaded.stages[s];
      const GraphRunner runner(stage.graph, Concat("stage", s));
      std::map<int, Bundle> env;
      for (const Action& action : plan.stages[s].actions) {
        current = action.microbatch;
        switch (action.kind) {
          case ActionKind::kRecvF: {
            std::optional<Envelope> message = channels[s - 1]->Receive();
            if (!message) return;  // another stage failed
            if (message->microbatch != action.microbatch) {
              throw InternalError(Concat("received micro-batch ", message->microbatch, ", expected ", action.microbatch));
            }
            env[action.microbatch] = std::move(message->values);
            break;
          }
          case ActionKind::kForward: {
            Bundle& values = env[action.microbatch];
            if (s == 0) {
              for (size_t i = 0; i < canonical.num_model_inputs; ++i) {
                values[{graph_inputs[i], 0}] = microbatches[action.microbatch][i];
              }
            }
            std::vector<c10::IValue> inputs;
            for (const BoundaryValue& key : stage.inputs) {
              if (auto p = params.find(key); p != params.end()) {
                inputs.push_back(p->second);
              } else if (auto v = values.find(key); v != values.end()) {
                inputs.push_back(v->second);
              } else {
                throw InternalError(Concat("stage input ", key.value->debugName(), " never arrived"));
              }
            }
            const auto start = std::chrono::steady_clock::now();
            std::vector<c10::IValue> outputs = runner.Run(std::move(inputs));
            run.busy_ms[s] += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
            for (size_t i = 0; i < stage.outputs.size(); ++i) values[stage.outputs[i]] = outputs[i];
            for (size_t k = 0; k < output_keys.size(); ++k) {
              auto it = values.find(output_keys[k]);
              if (it != values.end()) made[s][action.microbatch].emplace(k, it->second);
            }
            if (s == K - 1) env.erase(action.microbatch);
            break;
          }
          case ActionKind::kSendF: {
            Envelope message{action.microbatch, {}};
            for (auto& [key, value] : env[action.microbatch]) {
              if (needed_after[s].count(key)) message.values.emplace(key, value);
            }
            env.erase(action.microbatch);
            if (!channels[s]->Send(std::move(message))) return;
            break;
          }
          default:
            throw InternalError(Concat("action ", FormatAction(action), " in an inference plan"));
        }
      }
    } catch (const std::exception& e) {
      failure.Record(s, current, e.what());
    }
  };

  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (int s = 0; s < K; ++s) workers.emplace_back(worker, s);
  for (auto& w : workers) w.join();
  run.step_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!failure.What().empty()) throw Error(failure.What());

  std::vector<std::vector<c10::IValue>> results(M, std::vector<c10::IValue>(output_keys.size()));
  for (int mb = 0; mb < M; ++mb) {
    for (size_t k = 0; k < output_keys.size(); ++k) {
      bool found = false;
      for (int s = 0; s < K && !found; ++s) {
        auto it = made[s][mb].find(k);
        if (it != made[s][mb].end()) results[mb][k] = it->second, found = true;
      }
      if (found) continue;
      if (auto constant = torch::jit::toIValue(output_keys[k].value)) {
        results[mb][k] = *constant;
      } else {
        throw InternalError(Concat("no stage produced model output ", k, " for micro-batch ", mb));
      }
    }
  }
  run.outputs = JoinMicrobatches(results, loaded.output_batch_dims);
  return run;
}

}  // namespace mp
