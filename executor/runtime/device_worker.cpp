// DeviceWorker: one method per action kind; Run times each and records it.
#include "executor/runtime/device_worker.h"

#include <torch/csrc/autograd/autograd.h>

#include <algorithm>

#include "common/error.h"
#include "planner/graph/rng_scope.h"
#include "planner/graph/run_graph.h"

namespace mp {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

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

}  // namespace

StepResults::StepResults(int stages, int microbatches)
    : made(stages, std::vector<std::map<size_t, c10::IValue>>(microbatches)),
      losses(stages),
      busy_ms(stages, 0),
      events(stages) {}

DeviceWorker::DeviceWorker(const StepContext& context, StepResults& results, std::vector<Action> actions)
    : context_(context), results_(results), actions_(std::move(actions)) {
  current_.stage = actions_.empty() ? 0 : actions_.front().stage;
  current_.microbatch = -1;
}

bool DeviceWorker::Run() {
  for (const Action& a : actions_) {
    current_ = a;
    const Clock::time_point begin = Clock::now();
    InFlight& mb = flight_[{a.stage, a.microbatch}];
    bool open = true;
    switch (a.kind) {
      case ActionKind::kRecvF: open = RecvF(a, mb); break;
      case ActionKind::kForward: Forward(a, mb); break;
      case ActionKind::kSendF: open = SendF(a, mb); break;
      case ActionKind::kRecvB: open = RecvB(a, mb); break;
      case ActionKind::kBackward: Backward(a, mb); break;
      case ActionKind::kBackwardInput: BackwardInput(a, mb); break;
      case ActionKind::kBackwardWeight: BackwardWeight(a, mb); break;
      case ActionKind::kSendB: open = SendB(a, mb); break;
    }
    if (!open) return false;  // another thread failed
    const Clock::time_point end = Clock::now();
    if (IsCompute(a.kind)) results_.busy_ms[a.stage] += Ms(begin, end);
    results_.events[a.stage].push_back({a, Ms(context_.start, begin), Ms(context_.start, end)});
  }
  return true;
}

bool DeviceWorker::RecvF(const Action& a, InFlight& mb) {
  std::optional<Envelope> message = context_.links.Forward(a.stage - 1).Receive();
  if (!message) return false;
  if (message->microbatch != a.microbatch) {
    throw InternalError(Concat("received micro-batch ", message->microbatch, ", expected ", a.microbatch));
  }
  CopyReceived(*message);
  for (auto& [key, value] : message->values) {
    if (Training()) value = Detached(value, mb.leaves[key]);
    mb.values.emplace(key, std::move(value));
  }
  return true;
}

void DeviceWorker::CopyReceived(Envelope& message) const {
  MemoryMeter* meter = MemoryMeter::Installed();
  if (!meter || !meter->Counting()) return;
  const int owner = MemoryMeter::CurrentOwner();
  std::map<const c10::TensorImpl*, at::Tensor> copies;  // a tensor sent twice is copied once
  const auto own = [&](const at::Tensor& t) {
    // A stage on this same device sent it: already this device's.
    if (!t.defined() || !t.has_storage() || !t.storage().data() || meter->OwnerOf(t.storage().data()) == owner) {
      return t;
    }
    auto [it, fresh] = copies.try_emplace(t.unsafeGetTensorImpl());
    if (fresh) it->second = t.detach().clone().requires_grad_(t.requires_grad());
    return it->second;
  };
  for (auto& [key, value] : message.values) value = MapTensors(value, own);
  for (auto& [key, grads] : message.grads) {
    for (at::Tensor& g : grads) g = own(g);
  }
}

void DeviceWorker::Forward(const Action& a, InFlight& mb) {
  // Recomputation: which buffers the forward writes (BatchNorm's running
  // statistics), for Recompute to put back; found by value at the stage's
  // first forward of the step (BatchNorm's kernel writes them without
  // moving their version counters).
  Buffers before;
  if (Recomputes(a.stage) && !written_.count(a.stage)) {
    const at::NoGradGuard no_grad;
    for (const auto& [key, param] : context_.loaded.layout.stage_params[a.stage]) {
      if (param.defined() && !param.requires_grad()) before.emplace_back(param, param.clone());
    }
  }
  RunStage(a, mb);
  TakeOutputs(a, mb, true);
  if (Recomputes(a.stage)) {
    if (!written_.count(a.stage)) {
      std::vector<at::Tensor>& written = written_[a.stage];
      for (const auto& [buffer, was] : before) {
        if (!at::equal(buffer, was)) written.push_back(buffer);
      }
    }
    DropGraph(a, mb);
    if (a.stage + 1 == int(context_.loaded.stages.size())) KeepInputs(a, mb);  // it sends nothing
  }
  if (!Training() && a.stage + 1 == int(context_.loaded.stages.size())) Done(a);
}

void DeviceWorker::RunStage(const Action& a, InFlight& mb) {
  const LoadedPlan& loaded = context_.loaded;
  const StageLayout& layout = loaded.layout;
  const StageGraph& stage = loaded.stages[a.stage];
  const int whole = context_.first + a.microbatch;  // numbered over the whole batch
  if (a.stage == 0) {
    for (size_t i = 0; i < layout.model_inputs.size(); ++i) {
      const BoundaryValue& key = layout.model_inputs[i];
      if (auto p = mb.pristine.find(key); p != mb.pristine.end()) {  // the forward again, on what F was given
        mb.values[key] = p->second;
        continue;
      }
      mb.values[key] = context_.microbatches[whole][i];
      // A model that writes its input (x.add_(shift)) would run again on the written one.
      if (Recomputes(0) && !loaded.canonical.mutation.WritersOf(key.value).empty()) {
        mb.pristine.emplace(key, CloneTensors({mb.values[key]}).front());
      }
    }
  }
  std::vector<c10::IValue> inputs;
  const auto& params = layout.stage_params[a.stage];
  for (const BoundaryValue& key : stage.inputs) {
    if (auto p = params.find(key); p != params.end()) {
      inputs.emplace_back(p->second);
    } else if (auto v = mb.values.find(key); v != mb.values.end()) {
      inputs.push_back(v->second);
    } else {
      throw InternalError(Concat("stage input ", key.value->debugName(), " never arrived"));
    }
  }
  std::vector<c10::IValue> outputs;
  {
    const RngScope rng({context_.options.seed, context_.step, whole});
    outputs = loaded.runners[a.stage]->Run(std::move(inputs));
  }
  for (size_t i = 0; i < stage.outputs.size(); ++i) mb.values[stage.outputs[i]] = outputs[i];
}

void DeviceWorker::DropGraph(const Action& a, InFlight& mb) {
  for (const BoundaryValue& key : context_.loaded.stages[a.stage].outputs) {
    auto it = mb.values.find(key);
    if (it == mb.values.end()) continue;
    it->second = MapTensors(it->second, [](const at::Tensor& t) {
      return t.defined() && t.requires_grad() ? t.detach().requires_grad_(true) : t;
    });
  }
  mb.loss = at::Tensor();
}

void DeviceWorker::KeepInputs(const Action& a, InFlight& mb) {
  const auto& inputs = context_.loaded.stages[a.stage].inputs;
  for (auto it = mb.values.begin(); it != mb.values.end();) {
    const bool keep = mb.leaves.count(it->first) || std::find(inputs.begin(), inputs.end(), it->first) != inputs.end();
    it = keep ? std::next(it) : mb.values.erase(it);
  }
  mb.sent.clear();  // Recompute makes them again, with their graph
}

DeviceWorker::Buffers DeviceWorker::Recompute(const Action& a, InFlight& mb) {
  // The buffers F wrote, as they are now; restored after the backward,
  // whose graph may hold them.
  Buffers buffers;
  {
    const at::NoGradGuard no_grad;
    for (const at::Tensor& buffer : written_[a.stage]) buffers.emplace_back(buffer, buffer.clone());
  }
  RunStage(a, mb);
  TakeOutputs(a, mb, false);
  mb.sent.clear();
  for (const BoundaryValue& key : context_.loaded.layout.needed_after[a.stage]) {
    if (auto it = mb.values.find(key); it != mb.values.end()) mb.sent.emplace(key, FlattenTensors(it->second));
  }
  return buffers;
}

void DeviceWorker::Restore(Buffers& buffers) {
  const at::NoGradGuard no_grad;
  for (auto& [buffer, saved] : buffers) buffer.copy_(saved);
}

// The model outputs this forward made: the loss where its output is made
// (training: output 0's, or the model's own), or every output for the
// results (inference).
void DeviceWorker::TakeOutputs(const Action& a, InFlight& mb, bool record) {
  const StageLayout& layout = context_.loaded.layout;
  const std::vector<int>& output_of = context_.loaded.output_layout.output_of;
  for (size_t k = 0; k < layout.output_keys.size(); ++k) {
    auto it = mb.values.find(layout.output_keys[k]);
    if (it == mb.values.end()) continue;
    const TrainingStep* training = context_.training;
    if (Training() && int(k) == output_of.at(training->loss_tensor) && a.stage == layout.output_stage[k]) {
      // The loss tensor's place among output k's tensors.
      const size_t first = size_t(std::find(output_of.begin(), output_of.end(), int(k)) - output_of.begin());
      const auto tensors = FlattenTensors(it->second);
      if (tensors.size() <= training->loss_tensor - first) {
        throw InputError(Concat("training needs a tensor as the model's output ", k));
      }
      mb.loss = MicrobatchLoss(tensors[training->loss_tensor - first],
                               training->labels[context_.first + a.microbatch], training->loss,
                               training->batch_elements, training->reduction);
      if (record) results_.losses[a.stage].push_back(mb.loss.detach());
    } else if (!Training()) {
      results_.made[a.stage][a.microbatch].emplace(k, it->second);
    }
  }
}

bool DeviceWorker::SendF(const Action& a, InFlight& mb) {
  const auto& needed = context_.loaded.layout.needed_after[a.stage];
  Envelope message{a.microbatch, {}, {}};
  for (auto& [key, value] : mb.values) {
    if (!needed.count(key)) continue;
    message.values.emplace(key, value);
    if (Training()) mb.sent.emplace(key, FlattenTensors(value));
  }
  // Sent before this stage frees its copies, so the next stage wakes
  // without waiting for the frees.
  if (!context_.links.Forward(a.stage).Send(std::move(message))) return false;
  if (Recomputes(a.stage)) {
    KeepInputs(a, mb);
  } else if (Training()) {
    mb.values.clear();  // the autograd graph keeps what the backward needs
  } else {
    Done(a);
  }
  return true;
}

bool DeviceWorker::RecvB(const Action& a, InFlight& mb) {
  std::optional<Envelope> message = context_.links.Backward(a.stage).Receive();
  if (!message) return false;
  if (message->microbatch != a.microbatch) {
    throw InternalError(Concat("received gradients of micro-batch ", message->microbatch, ", expected ",
                               a.microbatch));
  }
  CopyReceived(*message);
  mb.grads = std::move(message->grads);
  return true;
}

void DeviceWorker::Roots(InFlight& mb, std::vector<at::Tensor>& roots, std::vector<at::Tensor>& seeds) const {
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
}

void DeviceWorker::Backward(const Action& a, InFlight& mb) {
  Buffers buffers;
  if (Recomputes(a.stage)) buffers = Recompute(a, mb);
  std::vector<at::Tensor> roots, seeds;
  Roots(mb, roots, seeds);
  if (!roots.empty()) torch::autograd::backward(roots, seeds);
  Restore(buffers);
  if (a.stage == 0) Done(a);  // nothing goes further back
}

void DeviceWorker::BackwardInput(const Action& a, InFlight& mb) {
  std::vector<at::Tensor> roots, seeds, leaves, params;
  Roots(mb, roots, seeds);
  for (const auto& [key, list] : mb.leaves) {
    for (const at::Tensor& leaf : list) {
      if (leaf.defined()) leaves.push_back(leaf);
    }
  }
  for (const auto& [key, param] : context_.loaded.layout.stage_params[a.stage]) {
    if (param.requires_grad()) params.push_back(param);
  }
  mb.split = std::make_unique<SplitBackward>(std::move(roots), std::move(seeds), leaves, params);
  // W starts from what I kept: the gradients that came back, and the
  // outputs they were for, go now rather than with W (zb-h1 held each
  // micro-batch's until its W, several at once on the first device).
  mb.grads.clear();
  mb.sent.clear();
  mb.loss = at::Tensor();
  // So do the values the forward left (the last stage's model outputs, a
  // GPT's logits): W needs only what I kept, and the leaves.
  mb.values.clear();
}

void DeviceWorker::BackwardWeight(const Action& a, InFlight& mb) {
  if (mb.split) mb.split->Weights();
  Done(a);  // the last action of a micro-batch on its stage
}

bool DeviceWorker::SendB(const Action& a, InFlight& mb) {
  Envelope message{a.microbatch, {}, {}};
  for (const auto& [key, leaves] : mb.leaves) {
    std::vector<at::Tensor>& grads = message.grads[key];
    for (const at::Tensor& leaf : leaves) grads.push_back(leaf.defined() ? leaf.grad() : at::Tensor());
  }
  if (!context_.links.Backward(a.stage - 1).Send(std::move(message))) return false;
  if (mb.split) {
    // The graph I kept for W holds the leaves (their accumulators do), and
    // with them their .grad, sent now: the message holds what was sent.
    // (A stage of a split schedule may run B instead, WithWholeBackward:
    // its micro-batch is done here, as in 1f1b; it was held to the end of
    // the step, every micro-batch's values with it.)
    for (auto& [key, leaves] : mb.leaves) {
      for (at::Tensor& leaf : leaves) {
        if (leaf.defined()) leaf.mutable_grad() = at::Tensor();
      }
    }
    mb.leaves.clear();  // W needs the roots only
  } else {
    Done(a);  // after the send, as above
  }
  return true;
}

}  // namespace mp
