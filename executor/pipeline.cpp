// RunPipeline. Values travel as bundles (value -> IValue) from stage s to
// s + 1: what s received plus what it made, pruned to what a later stage
// reads, so a value needed two stages on is relayed, as the plan's
// neighbour-only SEND/RECV actions require. Stage 0 starts each micro-batch's
// bundle from its slice of the model inputs; parameters never travel, each
// stage holds its own. Model outputs are collected per micro-batch from
// whichever stage makes them and joined in micro-batch order at the end.
//
// Training: a stage turns every received tensor that needs a gradient into a
// leaf of its own autograd graph (detach + requires_grad), so each stage's
// graph ends at its boundary and backward never crosses threads. A relayed
// value is sent on as that leaf. Backward of a micro-batch starts from the
// loss (the stage making output 0) and from the gradients the next stage
// sent back for what this stage sent it, roots that include relayed leaves,
// so their gradients add up; then each received leaf's .grad goes upstream.
// Parameter gradients accumulate in .grad across micro-batches. A parameter
// read by several stages (tied weights) is the real tensor in its first
// stage and a detached alias in the others; their gradients are added after
// the workers join. SGD steps every parameter once all stages are done, so
// a step that fails anywhere leaves the model unchanged (BatchNorm running
// statistics excepted: the forward updates them).
//
// Under a Distribution a process runs workers for its own stages only. At a
// boundary between two ranks a bridge thread stands in for the far side of
// each channel: it sends what the local worker queues as a WireMessage
// (values in the boundary's key order, which every process derives alike
// from the graph) or receives the peer's and queues it, so the workers run
// the same code as in one process. A failure closes the channels and aborts
// the process group, waking the bridges; the peers then see this rank gone.
#include "executor/pipeline.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "common/channel.h"
#include "common/error.h"
#include "common/worker_pool.h"
#include "executor/heap_sampler.h"
#include "executor/process_group.h"
#include "executor/scoped_threads.h"
#include "executor/wire.h"
#include "planner/graph/rng_scope.h"
#include "planner/graph/run_graph.h"

namespace mp {
namespace {

using Bundle = std::map<BoundaryValue, c10::IValue>;
using Clock = std::chrono::steady_clock;

// Forward: values; backward: each sent value's tensor gradients, in
// FlattenTensors order (undefined where none came).
struct Envelope {
  int microbatch = 0;
  Bundle values;
  std::map<BoundaryValue, std::vector<at::Tensor>> grads;
};

// A micro-batch between its forward and its backward on one stage.
struct InFlight {
  Bundle values;
  std::map<BoundaryValue, std::vector<at::Tensor>> leaves;  // received: FlattenTensors order
  std::map<BoundaryValue, std::vector<at::Tensor>> sent;    // sent on: the backward's roots
  std::map<BoundaryValue, std::vector<at::Tensor>> grads;   // came back for `sent`
  at::Tensor loss;                                          // where output 0 is made
};

// The first failure of the run, and the switch that stops every worker.
class Failure {
 public:
  Failure(std::vector<Channel<Envelope>*> channels, ProcessGroup* group)
      : channels_(std::move(channels)), group_(group) {}

  void Record(int stage, int microbatch, const std::string& what) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (message_.empty()) {
        message_ = microbatch < 0 ? Concat("stage ", stage, ": ", ErrorLine(what))
                                  : Concat("stage ", stage, ", micro-batch ", microbatch, ": ", ErrorLine(what));
      }
    }
    for (auto* channel : channels_) channel->Close();
    if (group_) group_->Abort();
  }
  const std::string& What() const { return message_; }

 private:
  std::vector<Channel<Envelope>*> channels_;
  ProcessGroup* group_;
  std::mutex mutex_;
  std::string message_;
};

// `value` with every tensor that needs a gradient replaced by a fresh leaf;
// `leaves` gets one entry per tensor in FlattenTensors order (undefined for
// tensors that need none).
c10::IValue Detached(const c10::IValue& value, std::vector<at::Tensor>& leaves) {
  return MapTensors(value, [&](const at::Tensor& t) {
    if (!t.defined() || !t.requires_grad()) {
      leaves.emplace_back();
      return t;
    }
    at::Tensor leaf = t.detach().requires_grad_(true);
    leaves.push_back(leaf);
    return leaf;
  });
}

double Ms(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

// Channel tags between two ranks: boundary s forward 2s, backward 2s + 1;
// the inference outputs' gather after them.
int ForwardTag(int boundary) { return 2 * boundary; }
int BackwardTag(int boundary) { return 2 * boundary + 1; }
constexpr int kOutputsTag = 1 << 20;
constexpr int kReplicaOutputsTag = (1 << 20) + 3;  // distribution.cpp has + 1 and + 2

// A key order every process derives alike from the same canonical graph:
// graph inputs, then node outputs in graph order; versions after that.
std::vector<BoundaryValue> InGraphOrder(const torch::jit::Graph& graph, std::set<BoundaryValue> keys) {
  std::map<const torch::jit::Value*, size_t> position;
  for (const torch::jit::Value* v : graph.inputs()) position.emplace(v, position.size());
  for (const torch::jit::Node* node : graph.nodes()) {
    for (const torch::jit::Value* v : node->outputs()) position.emplace(v, position.size());
  }
  std::vector<BoundaryValue> out(keys.begin(), keys.end());
  std::sort(out.begin(), out.end(), [&](const BoundaryValue& a, const BoundaryValue& b) {
    return std::make_pair(position.at(a.value), a.version) < std::make_pair(position.at(b.value), b.version);
  });
  return out;
}

WireMessage ToWire(Envelope envelope, const std::vector<BoundaryValue>& keys) {
  WireMessage message;
  message.microbatch = envelope.microbatch;
  for (const BoundaryValue& key : keys) {
    if (!envelope.values.empty()) message.values.push_back(std::move(envelope.values.at(key)));
    if (!envelope.grads.empty()) message.grads.push_back(std::move(envelope.grads.at(key)));
  }
  return message;
}

Envelope FromWire(WireMessage message, const std::vector<BoundaryValue>& keys) {
  if ((!message.values.empty() && message.values.size() != keys.size()) ||
      (!message.grads.empty() && message.grads.size() != keys.size())) {
    throw InternalError(Concat("a message of ", message.values.size(), " values and ", message.grads.size(),
                               " gradients for a boundary of ", keys.size()));
  }
  Envelope envelope{int(message.microbatch), {}, {}};
  for (size_t i = 0; i < message.values.size(); ++i) envelope.values.emplace(keys[i], std::move(message.values[i]));
  for (size_t i = 0; i < message.grads.size(); ++i) envelope.grads.emplace(keys[i], std::move(message.grads[i]));
  return envelope;
}

// Sums the gradients of params[i], i in `which`, over `group` in one
// message; a rank where `holds(i)` is false adds zeros and keeps its own.
template <typename Holds>
void SumGradients(ProcessGroup& group, const std::vector<LiftedTensor>& params, const std::vector<size_t>& which,
                  Holds holds, const std::string& what) {
  if (which.empty()) return;
  std::vector<at::Tensor> parts;
  for (size_t i : which) {
    const at::Tensor& p = params[i].tensor;
    parts.push_back(holds(i) && p.grad().defined() ? p.grad().reshape(-1) : at::zeros({p.numel()}, p.options()));
  }
  at::Tensor flat = at::cat(parts);
  try {
    group.AllReduceSum(flat);
  } catch (const std::exception& e) {
    throw Error(Concat(what, ": ", ErrorLine(e.what())));
  }
  int64_t offset = 0;
  for (size_t i : which) {
    const at::Tensor& p = params[i].tensor;
    if (holds(i)) p.mutable_grad() = flat.narrow(0, offset, p.numel()).view_as(p).clone();
    offset += p.numel();
  }
}

}  // namespace

int ThreadsPerStage(const Plan& plan, const PipelineOptions& options) {
  return options.threads_per_stage > 0 ? options.threads_per_stage : std::max(1, plan.profile.threads);
}

PipelineRun RunPipeline(const LoadedPlan& loaded, const std::vector<c10::IValue>& model_inputs,
                        const TrainingStep* training, const PipelineOptions& options, WorkerPool& workers,
                        int64_t step) {
  const Plan& plan = loaded.plan;
  const CanonicalGraph& canonical = loaded.canonical;
  if (plan.training != (training != nullptr)) {
    throw InputError(plan.training ? "this is a training plan (mode: train): run it with labels and an optimizer"
                                   : "this is an inference plan (mode: infer): it has no backward to train with");
  }
  const int K = int(loaded.stages.size());
  const int M = plan.microbatches;
  const Distribution* dist = options.distribution;
  if (plan.replicas > 1 && (!dist || dist->replicas != plan.replicas)) {
    throw InputError(Concat("this plan has ", plan.replicas, " replicas of the pipeline: run it as ", plan.replicas,
                            " x 1 to ", plan.replicas, " x ", K, " processes (--launch-local ", plan.replicas * K,
                            ", or under torchrun)"));
  }
  // Every replica's micro-batches; this rank's replica runs M of them from `first`.
  const auto microbatches = SplitMicrobatches(plan, model_inputs);
  const int first = dist ? dist->replica * M : 0;
  if (training && training->labels.size() != microbatches.size()) {
    throw InternalError(Concat(training->labels.size(), " label micro-batches for ", microbatches.size(),
                               " micro-batches"));
  }

  // Parameters: each stage passes the ones it reads. In training a
  // parameter read by several stages is an alias leaf after its first.
  const auto graph_inputs = canonical.graph->inputs();
  std::map<BoundaryValue, size_t> param_index;
  for (size_t i = 0; i < canonical.params.size(); ++i) param_index[{graph_inputs[canonical.num_model_inputs + i], 0}] = i;
  std::vector<std::map<BoundaryValue, at::Tensor>> stage_params(K);
  std::vector<std::pair<size_t, at::Tensor>> aliases;        // (param, alias) of tied parameters
  std::vector<int> first_user(canonical.params.size(), -1);
  std::vector<int> users(canonical.params.size(), 0);
  for (int s = 0; s < K; ++s) {
    for (const BoundaryValue& key : loaded.stages[s].inputs) {
      auto it = param_index.find(key);
      if (it == param_index.end()) continue;
      const at::Tensor& tensor = canonical.params[it->second].tensor;
      ++users[it->second];
      if (first_user[it->second] < 0) {
        first_user[it->second] = s;
        stage_params[s][key] = tensor;
      } else if (training && tensor.requires_grad()) {
        at::Tensor alias = tensor.detach().requires_grad_(true);
        aliases.emplace_back(it->second, alias);
        stage_params[s][key] = alias;
      } else {
        stage_params[s][key] = tensor;
      }
    }
  }
  if (training) {
    for (const auto& p : canonical.params) p.tensor.mutable_grad() = at::Tensor();
  }

  std::vector<BoundaryValue> output_keys;
  for (const torch::jit::Value* out : canonical.graph->outputs()) {
    output_keys.push_back({out, canonical.mutation.FinalVersion(out)});
  }
  // The loss is taken where output 0 is made (it may be relayed further).
  int loss_stage = -1;
  for (int s = 0; s < K && loss_stage < 0 && !output_keys.empty(); ++s) {
    const auto& outs = loaded.stages[s].outputs;
    if (std::find(outs.begin(), outs.end(), output_keys.front()) != outs.end()) loss_stage = s;
  }
  if (training && loss_stage < 0) throw InputError("training needs the model's first output to be computed, not passed through");
  // needed_after[s]: what any stage after s reads. Model outputs are not
  // relayed: the stage that makes one hands it to the results directly.
  std::vector<std::set<BoundaryValue>> needed_after(K);
  for (int s = K - 2; s >= 0; --s) {
    needed_after[s] = needed_after[s + 1];
    for (const BoundaryValue& key : loaded.stages[s + 1].inputs) {
      if (!param_index.count(key)) needed_after[s].insert(key);
    }
  }

  const int rank = dist ? dist->group->rank() : 0;
  const auto owner = [&](int s) { return dist ? dist->owner.at(s) : 0; };
  const auto mine = [&](int s) { return owner(s) == rank; };
  // boundary[s]: the keys a message from s to s + 1 carries, in graph order.
  std::vector<std::vector<BoundaryValue>> boundary(std::max(K - 1, 0));
  {
    std::set<BoundaryValue> held;
    for (size_t i = 0; i < canonical.num_model_inputs; ++i) held.insert({graph_inputs[i], 0});
    for (int s = 0; s + 1 < K; ++s) {
      held.insert(loaded.stages[s].outputs.begin(), loaded.stages[s].outputs.end());
      std::set<BoundaryValue> sent;
      for (const BoundaryValue& key : held) {
        if (needed_after[s].count(key)) sent.insert(key);
      }
      boundary[s] = InGraphOrder(*canonical.graph, sent);
      held = std::move(sent);
    }
  }

  // forward[s]: s -> s + 1; backward[s]: s + 1 -> s. A step sends M
  // messages each way, so a capacity of M never blocks a sender.
  std::vector<std::unique_ptr<Channel<Envelope>>> forward, backward;
  std::vector<Channel<Envelope>*> all;
  for (int s = 0; s + 1 < K; ++s) {
    forward.push_back(std::make_unique<Channel<Envelope>>(M));
    backward.push_back(std::make_unique<Channel<Envelope>>(M));
    all.push_back(forward.back().get());
    all.push_back(backward.back().get());
  }
  Failure failure(all, dist ? dist->group : nullptr);
  // made[s][mb]: the model outputs stage s made for micro-batch mb, by
  // output index; each worker writes only its own, so no lock is needed.
  std::vector<std::vector<std::map<size_t, c10::IValue>>> made(K, std::vector<std::map<size_t, c10::IValue>>(M));
  std::vector<std::vector<at::Tensor>> losses(K);
  PipelineRun run;
  run.step = step;
  run.busy_ms.assign(K, 0);
  run.events.assign(K, {});
  const int threads = ThreadsPerStage(plan, options);
  // This thread's own work (the optimizer step, gathering) runs with a
  // stage's thread count too: with more, its OpenMP team's threads spin
  // after each parallel region, on the cores the next step's stages need
  // (ConvNet, 2 stages of 1 thread on 2 cores: 16-17 ms a step, 13.5-15.5
  // with this thread at 1).
  const ScopedThreads calling_thread(threads);
  HeapSampler heap;
  const Clock::time_point start = Clock::now();

  const auto worker = [&](int s) {
    int current = -1;
    try {
      at::set_num_threads(threads);
      std::optional<at::NoGradGuard> no_grad;
      if (!training) no_grad.emplace();
      const StageGraph& stage = loaded.stages[s];
      const GraphRunner& runner = *loaded.runners[s];
      std::map<int, InFlight> flight;
      for (const Action& action : plan.stages[s].actions) {
        current = action.microbatch;
        const Clock::time_point begin = Clock::now();
        InFlight& mb = flight[action.microbatch];
        switch (action.kind) {
          case ActionKind::kRecvF: {
            std::optional<Envelope> message = forward[s - 1]->Receive();
            if (!message) return;  // another stage failed
            if (message->microbatch != action.microbatch) {
              throw InternalError(Concat("received micro-batch ", message->microbatch, ", expected ", action.microbatch));
            }
            for (auto& [key, value] : message->values) {
              if (training) value = Detached(value, mb.leaves[key]);
              mb.values.emplace(key, std::move(value));
            }
            break;
          }
          case ActionKind::kForward: {
            if (s == 0) {
              for (size_t i = 0; i < canonical.num_model_inputs; ++i) {
                mb.values[{graph_inputs[i], 0}] = microbatches[first + action.microbatch][i];
              }
            }
            std::vector<c10::IValue> inputs;
            for (const BoundaryValue& key : stage.inputs) {
              if (auto p = stage_params[s].find(key); p != stage_params[s].end()) {
                inputs.emplace_back(p->second);
              } else if (auto v = mb.values.find(key); v != mb.values.end()) {
                inputs.push_back(v->second);
              } else {
                throw InternalError(Concat("stage input ", key.value->debugName(), " never arrived"));
              }
            }
            std::vector<c10::IValue> outputs;
            {
              const RngScope rng({options.seed, step, first + action.microbatch});
              outputs = runner.Run(std::move(inputs));
            }
            for (size_t i = 0; i < stage.outputs.size(); ++i) mb.values[stage.outputs[i]] = outputs[i];
            for (size_t k = 0; k < output_keys.size(); ++k) {
              auto it = mb.values.find(output_keys[k]);
              if (it == mb.values.end()) continue;
              if (training && k == 0 && s == loss_stage) {
                const auto tensors = FlattenTensors(it->second);
                if (tensors.empty()) throw InputError("training needs a tensor as the model's first output");
                mb.loss = MicrobatchLoss(tensors.front(), training->labels[first + action.microbatch],
                                         training->loss, training->batch_elements);
                losses[s].push_back(mb.loss.detach());
              } else if (!training) {
                made[s][action.microbatch].emplace(k, it->second);
              }
            }
            if (!training && s == K - 1) flight.erase(action.microbatch);
            break;
          }
          case ActionKind::kSendF: {
            Envelope message{action.microbatch, {}, {}};
            for (auto& [key, value] : mb.values) {
              if (!needed_after[s].count(key)) continue;
              message.values.emplace(key, value);
              if (training) mb.sent.emplace(key, FlattenTensors(value));
            }
            // Sent before this stage frees its copies, so the next stage
            // wakes without waiting for the frees.
            if (!forward[s]->Send(std::move(message))) return;
            if (training) {
              mb.values.clear();  // the autograd graph keeps what the backward needs
            } else {
              flight.erase(action.microbatch);
            }
            break;
          }
          case ActionKind::kRecvB: {
            std::optional<Envelope> message = backward[s]->Receive();
            if (!message) return;
            if (message->microbatch != action.microbatch) {
              throw InternalError(Concat("received gradients of micro-batch ", message->microbatch, ", expected ",
                                         action.microbatch));
            }
            mb.grads = std::move(message->grads);
            break;
          }
          case ActionKind::kBackward: {
            std::vector<at::Tensor> roots, seeds;
            if (mb.loss.defined()) roots.push_back(mb.loss), seeds.push_back(at::ones_like(mb.loss));
            for (const auto& [key, grads] : mb.grads) {
              auto sent = mb.sent.find(key);
              if (sent == mb.sent.end() || sent->second.size() != grads.size()) {
                throw InternalError(Concat("gradients for ", key.value->debugName(), " that this stage did not send"));
              }
              for (size_t i = 0; i < grads.size(); ++i) {
                if (grads[i].defined() && sent->second[i].defined() && sent->second[i].requires_grad()) {
                  roots.push_back(sent->second[i]);
                  seeds.push_back(grads[i]);
                }
              }
            }
            if (!roots.empty()) torch::autograd::backward(roots, seeds);
            if (s == 0) flight.erase(action.microbatch);  // nothing goes further back
            break;
          }
          case ActionKind::kSendB: {
            Envelope message{action.microbatch, {}, {}};
            for (const auto& [key, leaves] : mb.leaves) {
              std::vector<at::Tensor>& grads = message.grads[key];
              for (const at::Tensor& leaf : leaves) grads.push_back(leaf.defined() ? leaf.grad() : at::Tensor());
            }
            if (!backward[s - 1]->Send(std::move(message))) return;
            flight.erase(action.microbatch);  // after the send, as above
            break;
          }
        }
        const Clock::time_point end = Clock::now();
        if (action.kind == ActionKind::kForward || action.kind == ActionKind::kBackward) run.busy_ms[s] += Ms(begin, end);
        run.events[s].push_back({action.kind, action.microbatch, Ms(start, begin), Ms(start, end)});
      }
    } catch (const std::exception& e) {
      failure.Record(s, current, e.what());
    }
  };

  // Bridges to other ranks: `stage` is the local stage a failure is
  // reported for.
  const auto send_bridge = [&](Channel<Envelope>& channel, int stage, int peer, int tag, int b) {
    int current = -1;
    try {
      for (int n = 0; n < M; ++n) {
        std::optional<Envelope> envelope = channel.Receive();
        if (!envelope) return;
        current = envelope->microbatch;
        SendMessage(*dist->group, peer, tag, ToWire(std::move(*envelope), boundary[b]));
      }
    } catch (const std::exception& e) {
      failure.Record(stage, current, e.what());
    }
  };
  const auto receive_bridge = [&](Channel<Envelope>& channel, int stage, int peer, int tag, int b) {
    int current = -1;
    try {
      for (int n = 0; n < M; ++n) {
        Envelope envelope = FromWire(ReceiveMessage(*dist->group, peer, tag), boundary[b]);
        current = envelope.microbatch;
        if (!channel.Send(std::move(envelope))) return;
      }
    } catch (const std::exception& e) {
      failure.Record(stage, current, e.what());
    }
  };

  std::vector<std::function<void()>> jobs;
  for (int s = 0; s < K; ++s) {
    if (mine(s)) jobs.push_back([&worker, s] { worker(s); });
  }
  for (int b = 0; b + 1 < K; ++b) {
    if (owner(b) == owner(b + 1) || (!mine(b) && !mine(b + 1))) continue;
    Channel<Envelope>* f = forward[b].get();
    Channel<Envelope>* g = backward[b].get();
    if (mine(b)) {
      jobs.push_back([&, b, f] { send_bridge(*f, b, owner(b + 1), ForwardTag(b), b); });
      if (training) jobs.push_back([&, b, g] { receive_bridge(*g, b, owner(b + 1), BackwardTag(b), b); });
    } else {
      jobs.push_back([&, b, f] { receive_bridge(*f, b + 1, owner(b), ForwardTag(b), b); });
      if (training) jobs.push_back([&, b, g] { send_bridge(*g, b + 1, owner(b), BackwardTag(b), b); });
    }
  }
  workers.RunAll(std::move(jobs));  // every job at once, each on a thread of its own
  run.step_ms = Ms(start, Clock::now());
  run.start_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(start.time_since_epoch()).count();
  run.peak_heap_bytes = heap.Stop();
  if (!failure.What().empty()) throw Error(failure.What());
  run.allreduce_ms.assign(K, 0);

  if (training) {
    // Only a step every stage finished changes the model: a failed one
    // leaves it as it was. Tied parameters: the aliases' gradients join the
    // real tensor's, which is stepped once.
    at::NoGradGuard no_grad;
    for (const auto& [i, alias] : aliases) {
      if (!alias.grad().defined()) continue;
      at::Tensor& grad = canonical.params[i].tensor.mutable_grad();
      grad = grad.defined() ? grad + alias.grad() : alias.grad().clone();
    }
    // A parameter read by stages of several ranks: each has the gradient
    // of its own stages; their sum is the whole gradient, on every one.
    std::vector<std::set<int>> ranks_using(users.size());
    for (int s = 0; s < K; ++s) {
      for (const auto& [key, tensor] : stage_params[s]) ranks_using[param_index.at(key)].insert(owner(s));
    }
    if (dist) {
      // Tied parameters over every rank: with replicas that sums every
      // replica's too, so the stage groups below leave them out.
      std::vector<size_t> shared;
      std::vector<bool> reduced(users.size(), false);
      for (size_t i = 0; i < users.size(); ++i) {
        if (ranks_using[i].size() > 1 && canonical.params[i].tensor.requires_grad()) shared.push_back(i), reduced[i] = true;
      }
      SumGradients(*dist->group, canonical.params, shared, [&](size_t i) { return ranks_using[i].count(rank) > 0; },
                   "adding up the gradients of parameters shared between ranks");
      for (const auto& [s, group] : dist->stage_groups) {
        const Clock::time_point begin = Clock::now();
        std::vector<size_t> own;  // the first of this rank's stages to read it reduces it
        for (const auto& [key, tensor] : stage_params[s]) {
          const size_t i = param_index.at(key);
          if (!reduced[i] && canonical.params[i].tensor.requires_grad()) own.push_back(i), reduced[i] = true;
        }
        std::sort(own.begin(), own.end());  // the same order on every replica (the map's is by address)
        SumGradients(*group, canonical.params, own, [](size_t) { return true; },
                     Concat("stage ", s, ": adding up its gradients over the ", dist->replicas, " replicas"));
        run.allreduce_ms[s] = Ms(begin, Clock::now());
      }
      if (dist->replicas > 1) run.step_ms = Ms(start, Clock::now());  // the plan's step ends after it too
    }
    if (training->sgd) {
      for (size_t i = 0; i < users.size(); ++i) {
        if (users[i] > 0 && ranks_using[i].count(rank)) training->sgd->Step(i, canonical.params[i].tensor);
      }
    }
    for (const auto& stage_losses : losses) {
      for (const at::Tensor& loss : stage_losses) run.loss += loss.item<double>();
    }
    return run;
  }

  // The first rank of each replica joins its outputs: the replica's other
  // ranks send what their stages made, as (stage, micro-batch, output
  // index, value) tuples. Then rank 0 joins the replicas'.
  const int leader = dist ? dist->replica * dist->ranks_per_replica : 0;
  if (dist) {
    try {
      if (rank != leader) {
        WireMessage message;
        for (int s = 0; s < K; ++s) {
          for (int mb = 0; mb < M; ++mb) {
            for (const auto& [k, value] : made[s][mb]) {
              message.values.push_back(c10::ivalue::Tuple::create({int64_t(s), int64_t(mb), int64_t(k), value}));
            }
          }
        }
        SendMessage(*dist->group, leader, kOutputsTag, message);
        return run;
      }
      for (int r = leader + 1; r < leader + dist->ranks_per_replica; ++r) {
        for (const c10::IValue& item : ReceiveMessage(*dist->group, r, kOutputsTag).values) {
          const auto& t = item.toTupleRef().elements();
          made.at(t[0].toInt()).at(t[1].toInt()).emplace(size_t(t[2].toInt()), t[3]);
        }
      }
    } catch (const std::exception& e) {
      throw Error(Concat("gathering the outputs on rank ", leader, ": ", ErrorLine(e.what())));
    }
  }
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
  run.outputs = JoinMicrobatches(results, loaded.output_layout.batch_dims);
  if (dist && dist->replicas > 1) {
    try {
      if (rank != 0) {
        WireMessage message;
        message.values = std::move(run.outputs);
        SendMessage(*dist->group, 0, kReplicaOutputsTag, message);
        return run;
      }
      std::vector<std::vector<c10::IValue>> replicas = {std::move(run.outputs)};
      for (int r = 1; r < dist->replicas; ++r) {
        replicas.push_back(ReceiveMessage(*dist->group, r * dist->ranks_per_replica, kReplicaOutputsTag).values);
      }
      run.outputs = JoinMicrobatches(replicas, loaded.output_layout.batch_dims);
    } catch (const InputError&) {
      throw;  // an output that cannot be joined says so itself
    } catch (const std::exception& e) {
      throw Error(Concat("gathering the replicas' outputs on rank 0: ", ErrorLine(e.what())));
    }
  }
  return run;
}

}  // namespace mp
