// MeasureProfile: for each micro-batch size, synthetic inputs of that size
// and node-by-node passes (forward, and backward in training), the sizes
// taking turns pass by pass, and the whole graph timed at the largest size.
// Per value, bytes at the smallest and largest sizes
// give bytes(m) = fixed + per_sample * m; per node, times, FLOPs and bytes
// moved are kept at every size for interpolation.
#include "planner/profile/measure.h"

#include <ATen/Parallel.h>
#include <torch/cuda.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>

#include "common/allocator.h"
#include "common/cpu_affinity.h"
#include "common/error.h"
#include "planner/graph/run_graph.h"
#include "planner/profile/contention.h"
#include "planner/profile/device_sync.h"
#include "planner/profile/drift_reference.h"
#include "planner/profile/handoff.h"
#include "planner/profile/step_overhead.h"
#include "planner/profile/node_by_node.h"
#include "planner/profile/node_overhead.h"
#include "planner/profile/optimizer_rate.h"
#include "planner/profile/pass_scale.h"
#include "planner/profile/whole_graph.h"

namespace mp {
namespace {

constexpr int kHandoffMessages = 100;  // 0.1 s
constexpr int kOverheadSteps = 100;    // 0.1 s per worker count
constexpr int kOptimizerSteps = 5;     // per optimizer: 5 of its steps on the model's parameters
constexpr double kProbeShare = 0.1;     // of the profile's time, for the contention probes' spread turns

c10::Device ParseDevice(const std::string& name) {
  c10::Device device(c10::kCPU);
  try {
    device = c10::Device(name);
  } catch (const c10::Error&) {
    throw InputError(Concat("unknown device '", name, "' (expected cpu, cuda or cuda:N)"));
  }
  if (device.is_cuda() && !torch::cuda::is_available())
    throw InputError(Concat("device '", name, "' is not available: no CUDA GPU is visible to this LibTorch"));
  if (!device.is_cpu() && !device.is_cuda())
    throw InputError(Concat("device '", name, "' is not supported for profiling (expected cpu or cuda)"));
  if (device.is_cuda() && device.has_index() && device.index() >= static_cast<int>(torch::cuda::device_count()))
    throw InputError(Concat("device '", name, "' is out of range: ", torch::cuda::device_count(), " GPU(s) visible"));
  return device;
}

// fixed + per_sample * m through the two end points.
ValueBytes FitBytes(int64_t m0, int64_t b0, int64_t m1, int64_t b1) {
  ValueBytes fit;
  if (m1 == m0) {
    fit.fixed = b0;
    return fit;
  }
  fit.per_sample = (b1 - b0) / (m1 - m0);
  fit.fixed = b0 - fit.per_sample * m0;
  return fit;
}

// Replaces the per-size vectors measured at `probed` (two sizes) by their
// affine extension to `sizes`; times stay 0 (a shapes-only profile).
void ExtrapolateWork(const std::vector<int64_t>& probed, const std::vector<int64_t>& sizes, Profile& profile) {
  const double m0 = double(probed[0]), m1 = double(probed[1]);
  const auto extend = [&](std::vector<double>& ys) {
    const double y0 = ys[0], slope = (ys[1] - ys[0]) / (m1 - m0);
    ys.clear();
    for (int64_t m : sizes) ys.push_back(std::max(0.0, y0 + slope * (double(m) - m0)));
  };
  for (NodeCost& cost : profile.nodes) {
    extend(cost.flops);
    extend(cost.bytes_moved);
    cost.forward_ms.assign(sizes.size(), 0.0);
    cost.spread.assign(sizes.size(), 0.0);
    if (profile.training) {
      cost.backward_ms.assign(sizes.size(), 0.0);
      cost.input_backward_ms.assign(sizes.size(), 0.0);
      cost.weight_backward_ms.assign(sizes.size(), 0.0);
    }
  }
}

// Thrown where the default sizes are profiled and the model fails at one
// of them but runs at another: MeasureProfile profiles the others.
struct SizeFails {
  Profile::LeftOutSize size;
};

// The model failed at micro-batch `size`. The shape probe ran the batch,
// but a smaller size can still fail (BatchNorm in training refuses one
// value per channel), and so can training at any size. So another size is
// suggested only where the graph runs at it (`run_at`, forward and backward
// in training); where it fails there too, the error stands alone, or the
// clearer one from that run (e.g. an in-place write autograd refuses).
// Where the sizes are the defaults (`defaults`), not the user's, and it
// runs at another, SizeFails.
[[noreturn]] void ThrowModelFails(int64_t size, const std::exception& e, const std::vector<int64_t>& sizes,
                                  const std::function<void(int64_t)>& run_at, bool defaults) {
  const std::string why = ErrorLine(e.what());
  const std::string failed = Concat("profiling at micro-batch size ", size, ": the model fails: ", why);
  int64_t other = 0;
  for (auto it = sizes.rbegin(); it != sizes.rend() && other == 0; ++it)
    if (*it != size) other = *it;
  if (other == 0) throw InputError(failed);
  try {
    run_at(other);
  } catch (const Error&) {
    throw;
  } catch (const std::exception&) {
    throw InputError(Concat(failed, " (and at size ", other, ")"));
  }
  if (defaults) throw SizeFails{{size, why}};
  throw InputError(Concat(failed, " (it runs at size ", other, ": choose other --microbatch-sizes)"));
}

}  // namespace

std::vector<int64_t> DefaultMicrobatchSizes(int64_t batch) {
  std::vector<int64_t> sizes;
  for (double p : {0.0, 1.0 / 3, 2.0 / 3, 1.0}) {
    const int64_t m = std::clamp<int64_t>(std::llround(std::pow(double(batch), p)), 1, batch);
    if (sizes.empty() || sizes.back() != m) sizes.push_back(m);
  }
  return sizes;
}

namespace {

Profile MeasureSizes(const CanonicalGraph& canonical, const std::vector<TensorSpec>& inputs,
                     const MeasureOptions& options, bool defaults) {
  Profile profile;
  profile.fingerprint = canonical.fingerprint;
  profile.inputs = inputs;
  profile.batch = SpecBatch(inputs);
  profile.training = options.training;
  profile.source = options.timed ? "measured" : "shapes";
  profile.threads = at::get_num_threads();
  profile.warmup = options.timing.warmup;
  profile.repeats = options.timing.repeats;
  profile.microbatch_sizes = options.microbatch_sizes;
  auto& sizes = profile.microbatch_sizes;
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  if (sizes.front() < 1 || sizes.back() > profile.batch)
    throw InputError(Concat("micro-batch sizes must lie in [1, ", profile.batch, "] (the batch); got ",
                            sizes.front(), "..", sizes.back()));
  const c10::Device device = ParseDevice(options.device);
  profile.device = device.str();
  // With MP_PIN_CPUS=1 the node passes run on CPU worker 0's cores, the
  // probe's workers each on its own (cpu_affinity.h): the cores of one
  // machine need not run alike.
  const std::vector<int> pinned =
      options.timed && device.is_cpu() ? WorkerCpus(0, std::max(1, options.workers), profile.threads)
                                       : std::vector<int>{};
  const ScopedPin pin(pinned);

  const size_t num_nodes = canonical.nodes.size();
  profile.nodes.resize(num_nodes);
  for (size_t n = 0; n < num_nodes; ++n) {
    profile.nodes[n].id = static_cast<int>(n);
    profile.nodes[n].kind = canonical.nodes[n]->kind().toQualString();
    profile.nodes[n].layer = canonical.layers[n];
  }

  std::unique_ptr<DriftReference> reference;
  if (options.timed) reference = std::make_unique<DriftReference>(device);
  PassOptions pass;
  pass.reference = reference.get();
  pass.training = options.training;
  pass.timed = options.timed;
  pass.timing = options.timing;
  pass.device = device;
  if (options.timed) {
    const std::vector<double>& given = options.node_overhead;
    pass.overhead = given.size() == 3 ? NodeOverhead{given[0], given[1], given[2]}
                                      : MeasureNodeOverhead(device, DeviceSync(device), options.training);
    profile.node_overhead = {pass.overhead.forward_call_ms, pass.overhead.forward_leaf_ms,
                             pass.overhead.backward_call_ms};
  }
  // A shapes-only pass needs no times, and FLOPs and bytes are affine in the
  // micro-batch size: run two small sizes and extrapolate, rather than run
  // the graph at the full batch. Not the smallest, where kernels differ: a
  // convolution's working memory at 1 sample read 0.07 MB, at 3 and 10
  // samples 9.5 and 9.8 (its weights reordered), which a line through 1
  // and 3 put at 33 MB at 8.
  const std::vector<int64_t> run_sizes =
      options.timed || sizes.size() <= 2 ? sizes : std::vector<int64_t>{sizes[1], sizes[2]};
  int64_t done = 0;
  const int64_t total =
      static_cast<int64_t>(run_sizes.size() * num_nodes * (options.training ? 2 : 1) * PassCount(pass));
  pass.progress = [&] {
    if (options.progress) options.progress(++done, total);
  };

  const auto run_at = [&](int64_t m) {
    const WholeGraph once(canonical, SyntheticInputs(WithBatch(inputs, m), options.seed), pass);  // runs it
  };
  // `work` at size `m`, where the model's own failure says so (ThrowModelFails).
  const auto at_size = [&](int64_t m, const std::function<void()>& work) {
    try {
      work();
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      ThrowModelFails(m, e, sizes, run_at, defaults);
    }
  };
  // A shapes-only profile does not run its smallest size, which training
  // can fail at (BatchNorm at one sample): run once there, to leave it out
  // or refuse it as a measured profile would (a tenth of ResNet-50's A100
  // profile; only where the graph normalises over the batch).
  const c10::Symbol batch_norm = c10::Symbol::fromQualString("aten::batch_norm");
  const c10::Symbol instance_norm = c10::Symbol::fromQualString("aten::instance_norm");
  const bool batch_statistics = std::any_of(canonical.nodes.begin(), canonical.nodes.end(), [&](const auto* n) {
    return n->kind() == batch_norm || n->kind() == instance_norm;
  });
  if (options.training && batch_statistics && run_sizes.front() != sizes.front()) {
    at_size(sizes.front(), [&] { run_at(sizes.front()); });
  }
  // Contention probes at the smallest size and the second-largest
  // (contention grows as micro-batches shrink; the full batch's copies would
  // double the memory the profile needs), or at the batch where it is the
  // only size; the planner interpolates between them. Two sizes, not every
  // one: the factor is noisy here, and more turns each beat more sizes.
  // Their turns run between the passes, the probe with the fewest turns
  // first, both together spending a tenth of the profile (contention.h).
  std::vector<int64_t> probe_sizes{sizes.size() > 1 ? sizes[sizes.size() - 2] : sizes.back()};
  if (sizes.front() < probe_sizes.front()) probe_sizes.insert(probe_sizes.begin(), sizes.front());
  // With replicas in view, the same again with the copies as processes
  // (copies.h), each kind a probe per size, all sharing the tenth.
  std::vector<std::unique_ptr<SharedSlowdownProbe>> probes, process_probes;
  if (options.timed && options.workers > 1 && device.is_cpu()) {
    const double share = kProbeShare / double(probe_sizes.size() * (options.replica_processes ? 2 : 1));
    for (int64_t m : probe_sizes) {
      at_size(m, [&] {
        probes.push_back(std::make_unique<SharedSlowdownProbe>(canonical,
                                                               SyntheticInputs(WithBatch(inputs, m), options.seed),
                                                               pass, options.workers, profile.threads, share));
      });
    }
    // Forked after the threads' copies were built (a size the model fails
    // at has failed above, with its own message) and before their threads
    // start, at the first turn: a child forked while a thread held a lock
    // it needs would wait for it forever (process_copies.h).
    if (options.replica_processes) {
      for (int64_t m : probe_sizes) {
        process_probes.push_back(std::make_unique<SharedSlowdownProbe>(
            canonical, SyntheticInputs(WithBatch(inputs, m), options.seed), pass, options.workers, profile.threads,
            share, true));
      }
    }
    pass.between_passes = [&] {
      SharedSlowdownProbe* fewest = nullptr;
      for (const auto* kind : {&probes, &process_probes}) {
        for (const auto& p : *kind) {
          if (!fewest || p->Turns() < fewest->Turns()) fewest = p.get();
        }
      }
      fewest->MaybeTurn();
    };
  }

  // The sizes take turns, pass by pass (NodeByNodePasses): a slow stretch
  // of the machine then falls on every size alike, not on one.
  std::vector<std::unique_ptr<NodeByNodePasses>> turns(run_sizes.size());
  for (size_t s = 0; s < run_sizes.size(); ++s) {
    const int64_t m = run_sizes[s];
    // The whole graph at every size: each size's node times are scaled to
    // it (WholeScale).
    pass.whole_graph = options.timed;
    at_size(m, [&] {
      turns[s] = std::make_unique<NodeByNodePasses>(
          canonical, SyntheticInputs(WithBatch(inputs, m), options.seed), pass);
    });
  }
  std::vector<PassResult> results(run_sizes.size());
  bool left = true;
  for (int round = 0; left; ++round) {
    // Once every size has run its first (warm-up) pass, the heap is about
    // as large as the passes need, but the sizes' passes and the probes
    // fragment it differently, and it went on growing by a few MiB a round
    // (the MLP: 364 to 390 MiB over 5 rounds). Each MiB grown was a weight
    // gradient landing on fresh pages inside a timed W: 0.5-3 ms against
    // 0.1 on mapped pages for the MLP's 1 MiB at 1 to 40 samples, every
    // sample of its first layers' W faulted, and those layers predicted
    // 2-3x what mpexec ran them in (the 2-stage cut put 4 layers on one
    // device and 12 on the other). A quarter of the heap (64 MiB at least,
    // 1 GiB at most: it stays the process's) mapped ahead covers that growth.
    if (round == 1 && options.timed && device.is_cpu())
      PrefaultHeap(std::clamp<int64_t>(HeapBytesHeld() / 4, int64_t(64) << 20, int64_t(1) << 30));
    left = false;
    for (size_t s = 0; s < run_sizes.size(); ++s) {
      if (!turns[s]) continue;
      at_size(run_sizes[s], [&] {
        turns[s]->RunPass();
        if (turns[s]->Done()) results[s] = turns[s]->Finish(), turns[s].reset();  // its last activations go
      });
      left = left || turns[s];
    }
  }

  // The nodes' medians scaled so that they add up to what a pass of them
  // takes (pass_scale.h).
  std::vector<SizePasses> passes;
  for (const PassResult& result : results) {
    SizePasses size{result.pass_ms, result.pass_split};
    for (const NodeSample& s : result.nodes) {
      size.plain_sum += s.forward_ms + s.backward_ms;
      size.split_sum += s.forward_ms + s.input_backward_ms + s.weight_backward_ms;
    }
    passes.push_back(std::move(size));
  }
  const double scale = !options.timed ? 1 : options.pass_scale > 0 ? options.pass_scale : PassScale(passes);
  if (options.timed) profile.pass_scale = scale;
  for (PassResult& result : results) {
    for (NodeSample& s : result.nodes) {
      s.forward_ms *= scale;
      s.backward_ms *= scale;
      s.input_backward_ms *= scale;
      s.weight_backward_ms *= scale;
    }
  }
  // Then each size's to what the whole graph takes there, warm (WholeScale);
  // the coverage is of the nodes before it, at the largest size.
  for (PassResult& result : results) {
    if (!options.timed) break;
    double forward = 0, backward = 0;
    for (const NodeSample& s : result.nodes) {
      forward += s.forward_ms;
      backward += s.backward_ms;
    }
    if (result.whole_forward.median_ms > 0) profile.coverage = forward / result.whole_forward.median_ms;
    if (result.whole_backward.median_ms > 0) profile.backward_coverage = backward / result.whole_backward.median_ms;
    const double f = WholeScale(result.whole_forward.median_ms, forward);
    const double b = options.training ? WholeScale(result.whole_backward.median_ms, backward) : 1;
    profile.whole_scale.push_back({f, b});
    for (NodeSample& s : result.nodes) {
      s.forward_ms *= f;
      s.backward_ms *= b;
      s.input_backward_ms *= b;
      s.weight_backward_ms *= b;
    }
  }

  // What adding a parameter's gradient into .grad costs a MiB: the
  // median over every size's kept passes.
  std::vector<double> accumulate;
  for (const PassResult& result : results) {
    for (size_t p = 0; p < result.accumulate_ms.size(); ++p) {
      accumulate.push_back(result.accumulate_ms[p] * double(1 << 20) / double(result.accumulate_bytes[p]));
    }
  }
  if (options.timed && !accumulate.empty()) profile.accumulate_ms_per_mib = Quantile(accumulate, 0.5);

  std::vector<std::vector<int64_t>> value_bytes;  // [run size][value]
  std::vector<double> reference_ms, pass_ratios;
  for (PassResult& result : results) {
    if (options.timed) {
      profile.whole_forward_ms = result.whole_forward.median_ms;
      profile.whole_backward_ms = result.whole_backward.median_ms;
      const double median = Quantile(result.pass_ms, 0.5);
      for (double ms : result.pass_ms) pass_ratios.push_back(median > 0 ? ms / median : 1.0);
      reference_ms.insert(reference_ms.end(), result.reference_ms.begin(), result.reference_ms.end());
    }
    for (size_t n = 0; n < num_nodes; ++n) {
      const NodeSample& s = result.nodes[n];
      NodeCost& cost = profile.nodes[n];
      cost.forward_ms.push_back(s.forward_ms);
      cost.spread.push_back(s.forward_spread);
      if (options.training) {
        cost.backward_ms.push_back(s.backward_ms);
        cost.input_backward_ms.push_back(s.input_backward_ms);
        cost.weight_backward_ms.push_back(s.weight_backward_ms);
      }
      cost.flops.push_back(s.work.flops);
      cost.bytes_moved.push_back(s.work.bytes_moved);
      cost.param_bytes = s.param_bytes;
    }
    value_bytes.push_back(std::move(result.value_bytes));
  }
  if (run_sizes != sizes) ExtrapolateWork(run_sizes, sizes, profile);
  profile.pass_band = SampleBand(pass_ratios);
  if (!reference_ms.empty()) {
    profile.reference_ms = Quantile(reference_ms, 0.5);
    profile.reference_band = SampleBand(reference_ms);
  }
  if (!probes.empty()) {
    // The band: the probe whose factor is least sure, its band narrowed to
    // the median of its own turns being the widest.
    double widest = -1;
    std::vector<double> speeds;
    for (size_t i = 0; i < probes.size(); ++i) {
      const SharedSlowdown shared = probes[i]->Finish(std::clamp(options.timing.repeats, 1, 3));
      speeds = shared.speeds;
      profile.shared_slowdown_sizes.push_back(probe_sizes[i]);
      profile.shared_slowdown_by_size.push_back(shared.factors);
      const Band sure = MedianBand(shared.band, shared.turns);
      if (sure.high - sure.low > widest) {
        widest = sure.high - sure.low;
        profile.shared_slowdown_band = shared.band;
        profile.shared_slowdown_turns = shared.turns;
      }
    }
    profile.shared_slowdown = profile.shared_slowdown_by_size.back();
    profile.shared_slowdown_microbatch = probe_sizes.back();
    for (const auto& p : process_probes) {
      profile.process_slowdown_by_size.push_back(p->Finish(std::clamp(options.timing.repeats, 1, 3)).factors);
    }
    process_probes.clear();  // their processes end
    if (!pinned.empty()) profile.worker_speed = speeds;  // at the larger size, as shared_slowdown
    probes.clear();  // their threads stop before the hand-off is timed
    profile.handoff_ms = MeasureHandoffMs(kHandoffMessages);
  }
  if (options.timed && device.is_cpu()) {
    profile.step_overhead_ms = MeasureStepOverheadMs(std::max(1, options.workers), profile.threads, kOverheadSteps);
  }
  if (options.timed && options.training && options.optimizer) {
    std::vector<at::Tensor> params;
    for (const LiftedTensor& p : canonical.params) {
      if (p.is_parameter) params.push_back(p.tensor);
    }
    OptimizerRates rates =
        MeasureOptimizerRates(params, device, kOptimizerSteps, std::max(1, options.workers), profile.threads);
    profile.optimizer_ms_per_mib = std::move(rates.ms_per_mib);
    profile.optimizer_slowdown = std::move(rates.slowdown);
  }

  const size_t num_values = value_bytes.front().size();
  profile.values.resize(num_values);
  for (size_t v = 0; v < num_values; ++v)
    profile.values[v] =
        FitBytes(run_sizes.front(), value_bytes.front()[v], run_sizes.back(), value_bytes.back()[v]);
  // Bytes counted at the smallest and largest size, as a line in m.
  const auto fit = [&](size_t n, int64_t NodeSample::*bytes) -> std::optional<ValueBytes> {
    const int64_t small = results.front().nodes[n].*bytes, large = results.back().nodes[n].*bytes;
    if (small < 0 || large < 0) return std::nullopt;
    return FitBytes(run_sizes.front(), small, run_sizes.back(), large);
  };
  // Bytes counted at each size (shapes only: on the line through the two
  // sizes run); empty where not counted.
  const auto per_size = [&](size_t n, int64_t NodeSample::*bytes) {
    std::vector<int64_t> at;
    for (const PassResult& result : results) {
      if (result.nodes[n].*bytes < 0) return std::vector<int64_t>{};
      at.push_back(result.nodes[n].*bytes);
    }
    if (run_sizes == sizes) return at;
    const ValueBytes line = FitBytes(run_sizes.front(), at.front(), run_sizes.back(), at.back());
    at.clear();
    for (int64_t m : sizes) at.push_back(std::max<int64_t>(0, line.fixed + line.per_sample * m));
    return at;
  };
  for (size_t n = 0; n < num_nodes; ++n) {
    profile.nodes[n].kept = fit(n, &NodeSample::kept_bytes);
    profile.nodes[n].weight_kept = fit(n, &NodeSample::weight_kept_bytes);
    profile.nodes[n].forward_working_bytes = per_size(n, &NodeSample::forward_working_bytes);
    profile.nodes[n].backward_working_bytes = per_size(n, &NodeSample::backward_working_bytes);
  }
  size_t next = canonical.graph->inputs().size();
  for (size_t n = 0; n < num_nodes; ++n) {
    for (size_t o = 0; o < canonical.nodes[n]->outputs().size(); ++o) {
      const ValueBytes& bytes = profile.values[next++];
      profile.nodes[n].output_bytes_fixed += bytes.fixed;
      profile.nodes[n].output_bytes_per_sample += bytes.per_sample;
    }
  }
  return profile;
}

}  // namespace

Profile MeasureProfile(const CanonicalGraph& canonical, const std::vector<TensorSpec>& inputs,
                       const MeasureOptions& options) {
  if (!options.microbatch_sizes.empty()) return MeasureSizes(canonical, inputs, options, false);
  // The default sizes: one the model fails at (BatchNorm in training, one
  // value per channel at one sample) is left out, the profile says why, and
  // the others are profiled; the planner plans no micro-batch below them.
  MeasureOptions sized = options;
  sized.microbatch_sizes = DefaultMicrobatchSizes(SpecBatch(inputs));
  std::vector<Profile::LeftOutSize> left_out;
  for (;;) {
    try {
      Profile profile = MeasureSizes(canonical, inputs, sized, true);
      profile.sizes_left_out = left_out;
      return profile;
    } catch (const SizeFails& e) {
      left_out.push_back(e.size);
      auto& sizes = sized.microbatch_sizes;
      sizes.erase(std::remove(sizes.begin(), sizes.end(), e.size.size), sizes.end());
    }
  }
}

}  // namespace mp
