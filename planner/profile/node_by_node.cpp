// The node-by-node engine. Timing is in situ: a pass runs every top-level
// node once, in canonical order, each as its own NodeProgram on the values
// the earlier nodes produced, with the clock (and a device sync) around
// each node; passes repeat and each node keeps the median of its samples.
// Each node so sees the caches and allocator state of a real forward, not
// its own inputs hot from a tight loop (which made sums of per-node times
// 10-15% short of the whole graph). Training: every input that needs a
// gradient is handed to the node as a new leaf, which cuts the autograd
// graph at node boundaries (an input written in place gets a copy of its
// leaf, since autograd refuses writes to leaves); each forward pass is
// followed by a reverse pass over the graph it built, which calls autograd
// on each node's outputs with the gradients its readers produced and passes
// the input gradients up. Outputs that are the very tensors the
// node received (list and tuple construction, unpacking) are routed directly.
// Every other kept pass in training times each node's backward split in two
// as zb-h1's I and W run it: first the gradients of the inputs that depend
// on the model's inputs (the graph kept), then those of the inputs computed
// from parameters alone (the parameters, a transposed weight, nn.LSTM's
// weight list). As in mpexec, every W runs after every I: the reverse pass
// times the I parts, then the W parts (and the nodes whose inputs are all
// parameters') run in the same reverse order. A node with both kinds of
// input gives those passes' samples to I and W only; its B comes from the
// other passes.
#include "planner/profile/node_by_node.h"

#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <climits>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>

#include "common/error.h"
#include "planner/graph/node_program.h"
#include "planner/graph/run_graph.h"
#include "planner/graph/split_backward.h"
#include "planner/profile/block_work.h"
#include "planner/profile/device_sync.h"
#include "planner/profile/memory_meter.h"
#include "planner/profile/whole_graph.h"

namespace mp {
namespace {

using c10::IValue;
using torch::jit::Node;
using torch::jit::Value;

// The meter's owner for what the profiler's thread allocates while it
// counts (no worker runs in a profile).
constexpr int kProfilerOwner = 0;

int64_t BytesOf(const IValue& value) {
  int64_t bytes = 0;
  for (const auto& t : FlattenTensors(value))
    if (t.defined()) bytes += static_cast<int64_t>(t.numel() * t.element_size());
  return bytes;
}

// Value ids as BuildOpGraph numbers them: graph inputs, then the outputs
// of each top-level node in canonical order.
std::unordered_map<const Value*, int> ValueIds(const CanonicalGraph& canonical) {
  std::unordered_map<const Value*, int> ids;
  for (const Value* in : canonical.graph->inputs()) ids.emplace(in, static_cast<int>(ids.size()));
  for (const Node* node : canonical.nodes)
    for (const Value* out : node->outputs()) ids.emplace(out, static_cast<int>(ids.size()));
  return ids;
}

// (value id, index among the value's flattened tensors)
using TensorSlot = std::pair<int, int>;

// What the reverse pass needs of one node's forward.
struct Recorded {
  std::vector<at::Tensor> leaves;       // inputs that need a gradient, as the node saw them
  std::vector<TensorSlot> leaf_slots;
  std::vector<at::Tensor> outputs;      // outputs, then inputs it wrote (after the write)
  std::vector<TensorSlot> output_slots;
  std::vector<int> written;             // value ids the node wrote in place
};

Timing Summarise(const std::vector<double>& samples) {
  Timing timing;
  timing.median_ms = Quantile(samples, 0.5);
  timing.p10_ms = Quantile(samples, 0.1);
  timing.p90_ms = Quantile(samples, 0.9);
  return timing;
}

class Engine {
 public:
  // Compiles the nodes; then the graph in one piece, where it is timed.
  Engine(const CanonicalGraph& canonical, const PassOptions& options, const std::vector<IValue>& model_inputs)
      : canonical_(canonical), options_(options), model_inputs_(model_inputs), ids_(ValueIds(canonical)),
        sync_(DeviceSync(options.device)) {
    const size_t n = canonical.nodes.size();
    programs_.resize(n);
    writes_.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const Node* node = canonical.nodes[i];
      if (node->kind() == c10::prim::Constant) continue;
      programs_[i] = std::make_unique<NodeProgram>(node);
      for (const Value* in : programs_[i]->Inputs()) {
        const auto& writers = canonical.mutation.WritersOf(in);
        writes_[i].push_back(std::find(writers.begin(), writers.end(), static_cast<int>(i)) != writers.end());
      }
    }
    result_.nodes.resize(n);
    result_.value_bytes.assign(ids_.size(), 0);
    params_in_.assign(ids_.size(), 0);
    ComputeLastUses();
    ComputeParameterOnly();
    forward_.resize(n);
    backward_.resize(n);
    input_backward_.resize(n);
    weight_backward_.resize(n);
    input_faulted_.resize(n);
    weight_faulted_.resize(n);
    if (options_.timed && options_.whole_graph)
      whole_ = std::make_unique<WholeGraph>(canonical_, model_inputs_, options_);
  }

  bool Training() const { return options_.training; }
  bool Done() const { return pass_ == PassCount(options_); }

  // The next of PassCount(options_) passes.
  void RunPass() {
    const size_t n = canonical_.nodes.size();
    const int passes = PassCount(options_);
    const int warmup = passes - (options_.timed ? std::max(1, options_.timing.repeats) : 1);
    const int pass = pass_++;
    const bool keep = pass >= warmup;
    // A warm-up pass splits: a split pass holds every node's graph until the
    // Ws run, more memory than a plain one, and the first to grow the heap
    // to it paid for the fresh pages (MobileNetV2 at 8 samples: its
    // hardtanh_ nodes, which have no W, read I 1.5x their B). An untimed
    // pass (sizes only) splits too: what I keeps for W is counted there.
    const bool split = keep && options_.timed ? (pass - warmup) % 2 == 1 : Training();
    // The first pass counts memory (a lock per allocation: a warm-up pass
    // when timed, the only one when not).
    counting_ = pass == 0 && options_.training && options_.device.is_cpu();
    if (counting_) MeasureKept();
    if (keep && options_.timed && options_.between_passes) options_.between_passes();
    if (keep && options_.reference) result_.reference_ms.push_back(options_.reference->TimeMs());
    double pass_ms = 0;
    pass_accumulate_ms_ = 0;
    pass_accumulate_bytes_ = 0;
    LoadInputs(model_inputs_);
    records_.assign(n, Recorded());
    for (size_t i = 0; i < n; ++i) {
      const double ms = Forward(static_cast<int>(i), pass == 0);
      if (keep) forward_[i].push_back(ms);
      pass_ms += ms;
      if (options_.progress) options_.progress();
    }
    if (pass + 1 == passes) {
      for (const Value* out : canonical_.graph->outputs()) result_.outputs.push_back(env_[Id(out)]);
    }
    if (options_.training) {
      grads_.assign(ids_.size(), {});
      SeedOutputGrads();
      std::vector<BackwardTimes> times(n);
      std::vector<DeferredW> deferred;  // split passes: W after every node's I
      if (counting_)
        for (NodeSample& node : result_.nodes) node.backward_working_bytes = 0;
      for (int i = static_cast<int>(n) - 1; i >= 0; --i) {
        if (split && WeightOnly(i)) {
          result_.nodes[i].weight_kept_bytes = 0;  // all W: nothing kept for it
          // The gradients of what it wrote held from its turn on: the
          // written value's maker comes before W's turn and would take them
          // (the list a loop appends to, made before the loop).
          deferred.push_back({i, nullptr, {}, true, 0, 0, HoldWrittenGrads(i)});
        } else {
          times[i] = Backward(i, split ? &deferred : nullptr);
        }
        if (options_.progress) options_.progress();
      }
      for (DeferredW& w : deferred) {
        if (w.whole) {
          for (auto& [id, held] : w.written_grads) {  // with what a W before it added
            auto& now = grads_[id];
            if (now.size() < held.size()) now.resize(held.size());
            for (size_t k = 0; k < held.size(); ++k)
              if (held[k].defined()) now[k] = now[k].defined() ? now[k] + held[k] : held[k];
          }
          times[w.node] = Backward(w.node, nullptr);
        } else {
          times[w.node].weight_ms = Weights(w, times[w.node].weight_faulted);
        }
      }
      counting_ = false;
      for (size_t i = 0; i < n; ++i) {
        const BackwardTimes& t = times[i];
        if (keep && (!t.split || !options_.timed)) backward_[i].push_back(t.input_ms + t.weight_ms);
        if (split && keep) {  // not the warm-up pass's: it counts memory, a lock per allocation, and grows the heap
          input_backward_[i].push_back(t.input_ms);
          weight_backward_[i].push_back(t.weight_ms);
          input_faulted_[i].push_back(t.input_faulted);
          weight_faulted_[i].push_back(t.weight_faulted);
        }
        pass_ms += t.input_ms + t.weight_ms;
      }
    }
    if (keep && options_.timed) {
      result_.pass_ms.push_back(pass_ms);
      result_.pass_split.push_back(split);
      if (pass_accumulate_bytes_ > 0) {
        result_.accumulate_ms.push_back(pass_accumulate_ms_);
        result_.accumulate_bytes.push_back(pass_accumulate_bytes_);
      }
    }
    // Release this pass's activations and gradients before the whole
    // graph runs again: holding them made its next run pay for fresh
    // memory, ~10% on ResNet-50.
    if (pass + 1 < passes) {
      records_.assign(n, Recorded());
      env_.assign(ids_.size(), IValue());
      grads_.assign(ids_.size(), {});
    }
    // The whole graph right after this size's node pass (one sample before
    // each kept pass): warm, as a stage that runs its micro-batches back to
    // back. Timed before the pass, after other sizes' passes, it found the
    // caches cold: GPT at 2 samples took 21.8 ms, the runs after it
    // 19.9-21.3, mpexec's stage 19.3 a micro-batch. Its backward into fresh
    // gradients: a node's adds nothing to .grad either (the accumulation is
    // timed apart, accumulate_ms_per_mib). Each backward runs on the graph
    // its own forward just built, as a training step does: a backward
    // repeated on one retained graph finds its buffers warm and ran up to
    // 1.7x faster (ConvNet at 8).
    if (whole_ && pass + 1 < passes && pass + 1 >= warmup) {
      const double forward_ms = whole_->Forward();
      whole_->ForgetGradients();
      whole_forward_.push_back(forward_ms);
      whole_backward_.push_back(options_.training ? whole_->Backward() : 0);
    }
  }

  // Each node's medians, once every pass has run.
  PassResult Finish() {
    if (!Done()) throw InternalError(Concat("node-by-node: ", pass_, " of ", PassCount(options_), " passes run"));
    const size_t n = canonical_.nodes.size();
    for (size_t i = 0; i < n; ++i) {
      NodeSample& node = result_.nodes[i];
      node.forward_ms = Quantile(forward_[i], 0.5);
      const double p10 = Quantile(forward_[i], 0.1), p90 = Quantile(forward_[i], 0.9);
      node.forward_spread = node.forward_ms > 0 ? (p90 - p10) / node.forward_ms : 0;
      if (!options_.training) continue;
      node.backward_ms = Quantile(backward_[i], 0.5);
      if (input_backward_[i].empty()) {  // one kept pass: no split measured; halves where it would split
        const bool both = has_input_part_[i] && has_weight_part_[i];
        node.input_backward_ms = both ? node.backward_ms / 2 : has_weight_part_[i] ? 0 : node.backward_ms;
        node.weight_backward_ms = node.backward_ms - node.input_backward_ms;
      } else {
        // Of the samples that took no fresh pages: a split pass holds more
        // than a plain one, and the first kept ones still grew the heap. A W
        // whose weight gradient landed on fresh pages (the MLP's 1 MiB: 256
        // faults) took 0.65-0.9 ms against 0.3 on pages a pass had used,
        // in 7-8 of its 15 Ws in the first kept split pass, 0-2 in the
        // second; with two such passes the median was their mean, and the
        // MLP's W read 1.5-2x what mpexec's took.
        node.input_backward_ms = UnfaultedMedian(input_backward_[i], input_faulted_[i]);
        node.weight_backward_ms = UnfaultedMedian(weight_backward_[i], weight_faulted_[i]);
      }
    }
    if (whole_) result_.whole_forward = Summarise(whole_forward_);
    if (!options_.training) return std::move(result_);
    if (whole_) result_.whole_backward = Summarise(whole_backward_);
    for (size_t p = 0; p < canonical_.params.size(); ++p) {
      const auto& grads = grads_[canonical_.num_model_inputs + p];
      result_.param_grads.push_back(grads.empty() ? at::Tensor() : grads[0]);
    }
    return std::move(result_);
  }

 private:
  int Id(const Value* value) const { return ids_.at(value); }

  // Runs `work` between device synchronisations and returns its time.
  double Timed(const std::function<void()>& work) const {
    if (!options_.timed) {
      work();
      return 0;
    }
    return SyncedMs(work, sync_);
  }

  // An autograd call from one node's outputs, timed, less what the call
  // itself adds (node_overhead.h); `faulted`: whether it took fresh pages
  // (ThreadMinorFaults).
  double TimedCall(const std::function<void()>& work, bool& faulted) const {
    const int64_t faults = ThreadMinorFaults();
    const double ms = Timed(work);
    faulted = ThreadMinorFaults() > faults;
    return std::max(0.0, ms - options_.overhead.backward_call_ms);
  }

  void LoadInputs(const std::vector<IValue>& model_inputs) {
    env_.assign(ids_.size(), IValue());
    const auto stack = canonical_.Stack(model_inputs);
    for (size_t i = 0; i < stack.size(); ++i) {
      const bool is_param = i >= canonical_.num_model_inputs;
      const bool wants_grad =
          options_.training && is_param && canonical_.params[i - canonical_.num_model_inputs].tensor.requires_grad();
      env_[i] = MapTensors(stack[i], [&](const at::Tensor& t) {
        at::Tensor moved = t.detach().to(options_.device);
        if (wants_grad && moved.is_floating_point()) moved.requires_grad_(true);
        return moved;
      });
      result_.value_bytes[i] = BytesOf(env_[i]);
      if (is_param) params_in_[i] = result_.value_bytes[i];
    }
  }

  void ComputeLastUses() {
    last_use_.assign(ids_.size(), -1);
    for (size_t n = 0; n < canonical_.nodes.size(); ++n)
      for (const Value* in : OuterInputs(canonical_.nodes[n])) last_use_[Id(in)] = static_cast<int>(n);
    for (const Value* out : canonical_.graph->outputs()) last_use_[Id(out)] = INT_MAX;
  }

  // Runs node n once in the current pass and returns its time; `first`
  // also records sizes and the work estimate.
  double Forward(int n, bool first) {
    const Node* node = canonical_.nodes[n];
    if (node->kind() == c10::prim::Constant) {
      const int id = Id(node->output());
      env_[id] = torch::jit::toIValue(node->output()).value();
      if (first) result_.value_bytes[id] = BytesOf(env_[id]);
      return 0;
    }
    const NodeProgram& program = *programs_[n];
    const std::vector<bool>& writes = writes_[n];
    Recorded& record = records_[n];
    std::vector<IValue> inputs;
    for (size_t i = 0; i < program.Inputs().size(); ++i) {
      const int id = Id(program.Inputs()[i]);
      if (!options_.training) {
        inputs.push_back(env_[id]);  // the very object: in-place writes land where readers look
        continue;
      }
      int k = 0;
      inputs.push_back(MapTensors(env_[id], [&](const at::Tensor& t) {
        at::Tensor seen = t;
        if (options_.training && t.defined() && t.requires_grad()) {
          seen = t.detach().requires_grad_(true);
          record.leaves.push_back(seen);
          record.leaf_slots.emplace_back(id, k);
          // Autograd refuses in-place writes to a leaf: write to a copy.
          if (writes[i]) seen = seen.clone();
        }
        ++k;
        return seen;
      }));
    }
    std::vector<IValue> stack = inputs;
    std::vector<IValue> outputs;
    const double ms = std::max(0.0, Timed([&] { outputs = program.Run(std::move(stack)); }) -
                                        options_.overhead.Forward(static_cast<int>(record.leaves.size())));

    std::vector<ArgTensors> out_dims;
    for (size_t o = 0; o < outputs.size(); ++o) {
      const int id = Id(node->outputs()[o]);
      env_[id] = outputs[o];
      if (first) {
        result_.value_bytes[id] = BytesOf(outputs[o]);
        out_dims.push_back(DimsOf(outputs[o]));
      }
      if (options_.training) Record(record, id, outputs[o]);
    }
    for (size_t i = 0; i < writes.size(); ++i) {
      if (!writes[i] || !options_.training) continue;
      const int id = Id(program.Inputs()[i]);
      env_[id] = inputs[i];  // the written copy (lists are rebuilt too) is the value from here on
      record.written.push_back(id);
      Record(record, id, inputs[i]);
    }
    if (first) RecordWork(n, out_dims);
    if (!options_.training) {
      for (const Value* in : program.Inputs())
        if (last_use_[Id(in)] == n) env_[Id(in)] = IValue();
    }
    return ms;
  }

  // The work estimate wants the node's inputs in argument order, constants
  // included, as they were before the node ran (shapes do not change in place).
  void RecordWork(int n, const std::vector<ArgTensors>& out_dims) {
    const Node* node = canonical_.nodes[n];
    NodeSample& sample = result_.nodes[n];
    std::vector<ArgTensors> in_dims;
    int64_t param_bytes = 0;
    for (const Value* in : OuterInputs(node)) {
      const bool constant = in->node()->kind() == c10::prim::Constant;
      in_dims.push_back(constant ? DimsOf(torch::jit::toIValue(in).value()) : DimsOf(env_[Id(in)]));
      if (!constant) param_bytes += params_in_[Id(in)];
    }
    // Parameters that reach a node inside a list or tuple (nn.LSTM's
    // weights) count where they are used, not where the list is built.
    const bool container = node->kind() == c10::prim::ListConstruct || node->kind() == c10::prim::TupleConstruct;
    if (container) {
      for (const Value* out : node->outputs()) params_in_[Id(out)] = param_bytes;
    } else {
      sample.param_bytes = param_bytes;
    }
    sample.work = EstimateWork(node->kind().toQualString(), in_dims, out_dims);
    if (!node->blocks().empty()) {
      // The nodes its blocks run, on the values it ran on (the inputs it
      // wrote hold their new values, in the same shapes).
      const auto inner = BlockWork(node, [&](const Value* v) { return env_[Id(v)]; });
      if (inner) sample.work = *inner;
    }
    for (const auto& dims : out_dims)
      for (const auto& t : dims) sample.output_bytes += t.Bytes();
  }

  // What a call allocated: the most beyond what was live before it, and
  // what it left.
  struct Allocated {
    int64_t most = 0;
    int64_t left = 0;
  };

  // Runs `work`, counting what it allocates while this pass counts (zeros
  // otherwise).
  Allocated Count(const std::function<void()>& work) {
    if (!counting_) {
      work();
      return {};
    }
    MemoryMeter& meter = MemoryMeter::Install();
    const MemoryMeter::Scope owner(kProfilerOwner);
    const MemoryMeter::CountingScope counting(&meter);
    const int64_t before = meter.Live(kProfilerOwner);
    meter.ResetPeaks();
    work();
    return {std::max<int64_t>(0, meter.Peak(kProfilerOwner) - before), meter.Live(kProfilerOwner) - before};
  }

  // Training on CPU, once per size before the first pass: the graph run as
  // one autograd graph (no leaves between nodes, every value dropped after
  // its last reader), each node's allocations counted under its id; what
  // is still alive once only the graph's roots are held is what autograd
  // keeps until the backward, charged to the node that made it: a relu's
  // output, a linear's input (to its producer), an LSTM's gates at every
  // step, the copies matmul makes of 4-d views (and not their base), max
  // pooling's indices. Each node's forward working memory too: the most it
  // had allocated beyond what it leaves.
  void MeasureKept() {
    MemoryMeter& meter = MemoryMeter::Install();
    LoadInputs(model_inputs_);
    std::vector<std::shared_ptr<torch::autograd::Node>> roots;
    {
      const MemoryMeter::Scope owner(kProfilerOwner);
      const MemoryMeter::CountingScope counting(&meter);
      for (size_t n = 0; n < canonical_.nodes.size(); ++n) {
        const Node* node = canonical_.nodes[n];
        const MemoryMeter::Tag tag(static_cast<int>(n));
        if (node->kind() == c10::prim::Constant) {
          env_[Id(node->output())] = torch::jit::toIValue(node->output()).value();
          result_.nodes[n].forward_working_bytes = 0;
          continue;
        }
        const NodeProgram& program = *programs_[n];
        std::vector<IValue> inputs;
        for (const Value* in : program.Inputs()) inputs.push_back(env_[Id(in)]);
        meter.ResetPeaks();
        std::vector<IValue> outputs = program.Run(std::move(inputs));
        for (size_t o = 0; o < outputs.size(); ++o) env_[Id(node->outputs()[o])] = std::move(outputs[o]);
        result_.nodes[n].forward_working_bytes =
            std::max<int64_t>(0, meter.Peak(kProfilerOwner) - meter.Live(kProfilerOwner));
        for (const Value* in : program.Inputs())
          if (last_use_[Id(in)] == static_cast<int>(n)) env_[Id(in)] = IValue();
      }
      for (const Value* out : canonical_.graph->outputs()) {
        for (const at::Tensor& t : FlattenTensors(env_[Id(out)]))
          if (t.defined() && t.grad_fn()) roots.push_back(t.grad_fn());
      }
      env_.assign(ids_.size(), IValue());
    }
    const std::unordered_map<int, int64_t> kept = meter.LiveByTag();
    roots.clear();
    for (size_t n = 0; n < canonical_.nodes.size(); ++n) {
      const auto it = kept.find(static_cast<int>(n));
      result_.nodes[n].kept_bytes = it == kept.end() ? 0 : it->second;
    }
  }

  static void Record(Recorded& record, int id, const IValue& value) {
    const auto tensors = FlattenTensors(value);
    for (size_t k = 0; k < tensors.size(); ++k) {
      record.outputs.push_back(tensors[k]);
      record.output_slots.emplace_back(id, static_cast<int>(k));
    }
  }

  // d(sum of the floating-point outputs) / d(output) = 1.
  void SeedOutputGrads() {
    for (const Value* out : canonical_.graph->outputs()) {
      const int id = Id(out);
      const auto tensors = FlattenTensors(env_[id]);
      grads_[id].resize(tensors.size());
      for (size_t k = 0; k < tensors.size(); ++k)
        if (tensors[k].defined() && tensors[k].requires_grad()) grads_[id][k] = at::ones_like(tensors[k]);
    }
  }

  at::Tensor TakeGrad(const TensorSlot& slot) {
    auto& grads = grads_[slot.first];
    return slot.second < static_cast<int>(grads.size()) ? grads[slot.second] : at::Tensor();
  }

  void AddGrad(const TensorSlot& slot, const at::Tensor& grad) {
    if (!grad.defined()) return;
    auto& grads = grads_[slot.first];
    if (static_cast<int>(grads.size()) <= slot.second) grads.resize(slot.second + 1);
    at::Tensor& sum = grads[slot.second];
    sum = sum.defined() ? sum + grad : grad;
    const int id = slot.first;
    const bool parameter = id >= int(canonical_.num_model_inputs) && id < int(canonical_.graph->inputs().size());
    if (parameter && options_.timed) Accumulate(slot, grad);
  }

  // A parameter's gradient added in place into the one kept from the pass
  // before, as autograd adds each micro-batch's after the first into .grad
  // (that gradient, like .grad, last touched a pass ago). Timed apart from
  // the node: the planner charges it per micro-batch after the first.
  void Accumulate(const TensorSlot& slot, const at::Tensor& grad) {
    at::Tensor& into = accumulated_[slot];
    if (!into.defined() || !into.sizes().equals(grad.sizes())) {
      into = grad.detach().clone();
      return;
    }
    const at::NoGradGuard no_grad;
    pass_accumulate_ms_ += Timed([&] { into.add_(grad); });
    pass_accumulate_bytes_ += int64_t(grad.numel() * grad.element_size());
  }

  // Values computed from parameters alone (the parameters themselves
  // included): their gradients are W's. Constants count as neither.
  void ComputeParameterOnly() {
    parameter_only_.assign(ids_.size(), false);
    for (size_t i = canonical_.num_model_inputs; i < canonical_.graph->inputs().size(); ++i) parameter_only_[i] = true;
    for (const Node* node : canonical_.nodes) {
      bool any = false, all = true;
      for (const Value* in : OuterInputs(node)) {
        if (in->node()->kind() == c10::prim::Constant) continue;
        any = any || parameter_only_[Id(in)];
        all = all && parameter_only_[Id(in)];
      }
      for (const Value* out : node->outputs()) parameter_only_[Id(out)] = any && all;
    }
    has_input_part_.assign(canonical_.nodes.size(), false);
    has_weight_part_.assign(canonical_.nodes.size(), false);
  }

  struct BackwardTimes {
    double input_ms = 0;   // all of it when not split
    double weight_ms = 0;
    bool split = false;    // timed as two calls
    bool input_faulted = false, weight_faulted = false;  // took fresh pages (ThreadMinorFaults)
  };

  // A split pass's W work, run once every node's I has run, as mpexec's W
  // runs after its stage's I: timed right after its node's I, a W found
  // the gradient and the saved inputs I had just read warm, and a middle
  // stage's W then ran 1.2x its nodes' sum in mpexec (GPT, zb-h1).
  struct DeferredW {
    int node = -1;
    std::shared_ptr<SplitBackward> split;  // I's, as mpexec's workers split a stage's backward
    std::vector<size_t> leaves;            // the record's leaves W computes
    bool whole = false;                    // the node's inputs are all parameters' (a weight's transpose)
    // While the pass counts: what I allocated at its most, less what it
    // keeps for W, and the input gradients it made.
    int64_t input_working = 0;
    int64_t input_gradients = 0;
    // whole: the gradients of the values it wrote, held from its turn
    std::vector<std::pair<int, std::vector<at::Tensor>>> written_grads;
  };

  std::vector<std::pair<int, std::vector<at::Tensor>>> HoldWrittenGrads(int n) {
    std::vector<std::pair<int, std::vector<at::Tensor>>> held;
    for (int id : records_[n].written) held.emplace_back(id, std::exchange(grads_[id], {}));
    return held;
  }

  // Every input of node n that needs a gradient is computed from
  // parameters alone: its whole backward is W's, and runs in W's turn.
  bool WeightOnly(int n) const {
    const Recorded& record = records_[n];
    if (record.leaves.empty()) return false;
    for (const TensorSlot& slot : record.leaf_slots)
      if (!parameter_only_[slot.first]) return false;
    return true;
  }

  // The record's leaves `part` (indices).
  static std::vector<at::Tensor> Part(const Recorded& record, const std::vector<size_t>& part) {
    std::vector<at::Tensor> leaves;
    for (size_t i : part) leaves.push_back(record.leaves[i]);
    return leaves;
  }

  // The deferred W of a split node; returns its time, and in `faulted`
  // whether it took fresh pages.
  double Weights(DeferredW& w, bool& faulted) {
    const Recorded& record = records_[w.node];
    double ms = 0;
    const Allocated weights = Count([&] { ms = TimedCall([&] { w.split->Weights(); }, faulted); });
    // B makes both at once and shares their scratch (a convolution's
    // reordered weights, which I and W each make): the larger of I's and
    // W's with I's gradients, not their sum (ResNet-50's 3x3 convolutions
    // of 512 channels: 19 MB in B, 28 in I and W).
    if (counting_) {
      result_.nodes[w.node].backward_working_bytes = std::max(w.input_working, weights.most + w.input_gradients);
    }
    for (size_t i : w.leaves) AddGrad(record.leaf_slots[i], record.leaves[i].grad());
    w.split.reset();
    return ms;
  }

  // One backward of node n with the gradients its readers produced in this
  // pass; returns its time. With `defer` and inputs of both kinds, times
  // only I (the graph kept) and leaves W in `defer`.
  BackwardTimes Backward(int n, std::vector<DeferredW>* defer) {
    const Recorded& record = records_[n];
    if (defer) result_.nodes[n].weight_kept_bytes = 0;
    std::vector<at::Tensor> outs, out_grads;
    std::vector<std::pair<at::Tensor, at::Tensor>> direct;  // output is an input leaf
    for (size_t i = 0; i < record.outputs.size(); ++i) {
      const at::Tensor& out = record.outputs[i];
      const at::Tensor grad = TakeGrad(record.output_slots[i]);
      if (!grad.defined() || !out.defined() || !out.requires_grad()) continue;
      auto same = [&](const at::Tensor& t) { return t.is_same(out); };
      auto seen = std::find_if(outs.begin(), outs.end(), same);
      if (seen != outs.end()) {
        out_grads[seen - outs.begin()] = out_grads[seen - outs.begin()] + grad;
      } else if (std::any_of(record.leaves.begin(), record.leaves.end(), same)) {
        direct.emplace_back(out, grad);
      } else {
        outs.push_back(out);
        out_grads.push_back(grad);
      }
    }
    // The written values' gradients were for the version after the write;
    // what flows up from here is for the version before it.
    for (int id : record.written) grads_[id].clear();
    for (const Value* out : canonical_.nodes[n]->outputs()) grads_[Id(out)].clear();

    std::vector<at::Tensor> leaf_grads(record.leaves.size());
    BackwardTimes times;
    if (!outs.empty() && !record.leaves.empty()) {
      std::vector<size_t> parts[2];  // leaf indices: [0] I's, [1] W's
      for (size_t i = 0; i < record.leaves.size(); ++i) parts[parameter_only_[record.leaf_slots[i].first]].push_back(i);
      if (!parts[0].empty()) has_input_part_[n] = true;
      if (!parts[1].empty()) has_weight_part_[n] = true;
      times.split = defer && !parts[0].empty() && !parts[1].empty();
      if (times.split) {
        std::shared_ptr<SplitBackward> split;
        const Allocated input = Count([&] {
          times.input_ms = TimedCall(
              [&] {
                split =
                    std::make_shared<SplitBackward>(outs, out_grads, Part(record, parts[0]), Part(record, parts[1]));
              },
              times.input_faulted);
        });
        result_.nodes[n].weight_kept_bytes = split->HeldBytes();
        int64_t input_grads = 0;
        for (size_t i : parts[0]) {
          leaf_grads[i] = record.leaves[i].grad();
          input_grads += BytesOf(leaf_grads[i]);
        }
        // What I made and keeps for W beside its inputs' gradients (an
        // LSTM's gates' gradients at every step) a whole backward makes and
        // frees step by step: not B's working memory.
        const int64_t input_working = input.most - std::max<int64_t>(0, input.left - input_grads);
        defer->push_back({n, std::move(split), parts[1], false, input_working, input_grads, {}});
      } else {
        double ms = 0;
        bool faulted = false;
        const Allocated whole = Count([&] {
          ms = TimedCall(
              [&] {
                leaf_grads = torch::autograd::grad(outs, record.leaves, out_grads, /*retain_graph=*/false,
                                                   /*create_graph=*/false, /*allow_unused=*/true);
              },
              faulted);
        });
        if (counting_) result_.nodes[n].backward_working_bytes = whole.most;
        (parts[0].empty() ? times.weight_ms : times.input_ms) = ms;
        (parts[0].empty() ? times.weight_faulted : times.input_faulted) = faulted;
      }
    }
    for (size_t i = 0; i < leaf_grads.size(); ++i) AddGrad(record.leaf_slots[i], leaf_grads[i]);
    for (const auto& [leaf, grad] : direct) {
      for (size_t i = 0; i < record.leaves.size(); ++i)
        if (record.leaves[i].is_same(leaf)) AddGrad(record.leaf_slots[i], grad);
    }
    return times;
  }

  const CanonicalGraph& canonical_;
  const PassOptions options_;  // a copy: the profiler runs several sizes at once, each with its own
  const std::vector<IValue> model_inputs_;
  int pass_ = 0;  // passes run
  bool counting_ = false;  // this pass counts what each backward allocates (NodeSample::backward_working_bytes)
  std::unique_ptr<WholeGraph> whole_;
  std::vector<double> whole_forward_, whole_backward_;
  std::vector<std::vector<double>> forward_, backward_, input_backward_, weight_backward_;  // node -> kept samples
  std::vector<std::vector<bool>> input_faulted_, weight_faulted_;  // the split samples' (ThreadMinorFaults)
  std::unordered_map<const Value*, int> ids_;
  std::function<void()> sync_;
  std::vector<std::unique_ptr<NodeProgram>> programs_;  // null for constants
  std::vector<std::vector<bool>> writes_;               // per program input: written in place
  std::vector<int> last_use_;
  std::vector<int64_t> params_in_;  // parameter bytes a value is or carries
  std::vector<bool> parameter_only_;  // value id -> computed from parameters alone
  std::vector<bool> has_input_part_, has_weight_part_;  // node: some leaf of that kind was seen
  std::vector<IValue> env_;
  std::vector<Recorded> records_;
  std::vector<std::vector<at::Tensor>> grads_;  // value id -> gradient per flattened tensor
  std::map<TensorSlot, at::Tensor> accumulated_;  // a parameter's gradients added up, kept across passes
  double pass_accumulate_ms_ = 0;
  int64_t pass_accumulate_bytes_ = 0;
  PassResult result_;
};

}  // namespace

int PassCount(const PassOptions& options) {
  return options.timed ? std::max(1, options.timing.warmup) + std::max(1, options.timing.repeats) : 1;
}

// Impl is defined in this file alone, so its anonymous-namespace base breaks
// no one-definition rule; GCC warns only when the unity build includes this
// file into another (clang has no such warning: the sanitizer builds).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wsubobject-linkage"
#endif
struct NodeByNodePasses::Impl : Engine {
  using Engine::Engine;
};
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

NodeByNodePasses::NodeByNodePasses(const CanonicalGraph& canonical, const std::vector<IValue>& model_inputs,
                                   const PassOptions& options) {
  std::optional<torch::NoGradGuard> no_grad;
  if (!options.training) no_grad.emplace();
  impl_ = std::make_unique<Impl>(canonical, options, model_inputs);
}

NodeByNodePasses::~NodeByNodePasses() = default;

bool NodeByNodePasses::Done() const { return impl_->Done(); }

void NodeByNodePasses::RunPass() {
  std::optional<torch::NoGradGuard> no_grad;
  if (!impl_->Training()) no_grad.emplace();
  impl_->RunPass();
}

PassResult NodeByNodePasses::Finish() { return impl_->Finish(); }

PassResult RunNodeByNode(const CanonicalGraph& canonical, const std::vector<IValue>& model_inputs,
                         const PassOptions& options) {
  NodeByNodePasses passes(canonical, model_inputs, options);
  while (!passes.Done()) passes.RunPass();
  return passes.Finish();
}

}  // namespace mp
