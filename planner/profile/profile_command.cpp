// ProfileModel: the profile step behind mpplan. Sets the intra-op thread
// count first (times depend on it, and the profile records it), then one
// of three sources: --profile-in (checked against this graph and inputs),
// --device-profile (a shapes-only pass plus the roofline, optionally
// calibrated by a measurement here), or a measurement on --device.
#include "planner/profile/profile_command.h"

#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>  // at::NoGradGuard (ATen.h leaves it out in LibTorch 2.x)

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <thread>

#include "common/allocator.h"
#include "common/atomic_file.h"
#include "common/error.h"
#include "common/progress.h"
#include "planner/graph/build_op_graph.h"
#include "planner/graph/canonical_graph.h"
#include "planner/graph/model_file.h"
#include "planner/graph/resolve_inputs.h"
#include "planner/graph/run_graph.h"
#include "planner/graph/scaled_shapes.h"
#include "planner/profile/analytic.h"
#include "planner/profile/device_profile.h"
#include "planner/profile/measure.h"
#include "planner/profile/profile_file.h"

namespace mp {
namespace {

// The graph's shapes probed without autograd: for a model training refuses.
bool RunsWithoutAutograd(const CanonicalGraph& canonical, const std::vector<TensorSpec>& inputs) {
  const at::NoGradGuard no_grad;
  OpGraph graph = BuildOpGraph(canonical);
  try {
    FillShapesForBatch(canonical, inputs, graph);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

// `pass_scale`, `node_overhead`: for sizes added to a profile, its own
// (MeasureOptions).
Profile Measure(const CanonicalGraph& canonical, const ProfileRequest& request,
                const std::vector<TensorSpec>& inputs, bool timed, int workers = 1,
                const std::vector<int64_t>& sizes = {}, double pass_scale = 0,
                const std::vector<double>& node_overhead = {}) {
  MeasureOptions options;
  options.pass_scale = pass_scale;
  options.node_overhead = node_overhead;
  options.training = request.training;
  options.microbatch_sizes = sizes.empty() ? request.microbatch_sizes : sizes;
  options.timing = request.timing;
  options.device = request.device;
  options.timed = timed;
  options.workers = workers;
  options.replica_processes = request.replica_processes && workers > 1;
  // Sizes added to a profile keep its optimizer rates (MergeSizes); a
  // calibrated profile estimates them for the device it names.
  options.optimizer = sizes.empty() && !request.calibrate;
  ProgressBar bar(timed ? "profiling" : "sizing", "node passes", request.progress);
  options.progress = [&](int64_t done, int64_t total) { bar.Update(done, total); };
  Profile profile = MeasureProfile(canonical, inputs, options);
  bar.Finish();
  return profile;
}

std::vector<int64_t> SortedUnique(std::vector<int64_t> sizes) {
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

std::string Fixed(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", value);
  return text;
}

}  // namespace

int DefaultThreads(int stages) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, stages));
}

ProfiledModel ProfileModel(const ProfileRequest& request) {
  if (request.threads < 0) throw InputError(Concat("--threads must be at least 1, got ", request.threads));
  if (request.timing.repeats < 1) throw InputError(Concat("--repeats must be at least 1, got ", request.timing.repeats));
  if (request.timing.warmup < 0) throw InputError(Concat("--warmup must not be negative, got ", request.timing.warmup));
  // Flags that would be ignored are refused: the user asked for something.
  if (request.calibrate && request.device_profile.empty()) {
    throw InputError(
        "--calibrate fits a --device-profile's efficiencies to a measurement here: name the profile to fit "
        "(e.g. --device-profile generic-cpu)");
  }
  if (request.calibrate && !request.profile_in.empty()) {
    throw InputError("--calibrate with --profile-in: the profile read keeps its own times; calibrate when making it "
                     "(with --profile-out)");
  }
  KeepFreedMemory();
  at::set_num_threads(request.threads > 0 ? request.threads : DefaultThreads(request.stages));

  const auto load_start = std::chrono::steady_clock::now();
  // Shared: a measured profile's measure_sizes measures on them later.
  const auto model = std::make_shared<ModelFile>(LoadModelFile(request.model_path));
  CanonicalOptions canonical_options;
  canonical_options.training = request.training;
  canonical_options.given = InputsGiven(*model, request.input_flags);
  const auto canonical_ptr = std::make_shared<const CanonicalGraph>(Canonicalize(model->module, canonical_options));
  const CanonicalGraph& canonical = *canonical_ptr;
  ProfiledModel result;
  result.inputs = ResolveInputs(*model, canonical, request.input_flags);
  if (request.batch != 0) {
    if (request.batch < 0) throw InputError(Concat("--batch must be at least 1, got ", request.batch));
    result.inputs = WithBatch(result.inputs, request.batch);
  }
  SpecBatch(result.inputs);
  result.graph = BuildOpGraph(canonical);
  {
    // Inference runs without autograd, here as in the profile and mpexec: a
    // graph traced from a forward that wrote under torch.no_grad()
    // (spectral_norm's power iteration, `out=` into its buffers) fails with
    // it, and runs without.
    std::optional<at::NoGradGuard> no_grad;
    if (!request.training) no_grad.emplace();
    try {
      FillShapesForBatch(canonical, result.inputs, result.graph);
    } catch (const InputError& e) {
      if (!request.training || !RunsWithoutAutograd(canonical, result.inputs)) throw;
      throw InputError(
          Concat(e.what(), "; it runs without autograd, so it can be planned for inference (--mode infer), not trained"));
    }
    result.outputs = ProbeOutputs(canonical, result.inputs);
  }
  result.load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  if (request.check_graph) request.check_graph(result.graph);
  if (request.check_outputs) request.check_outputs(result.outputs);

  if (!request.profile_in.empty()) {
    result.profile = ProfileFromYaml(ReadTextFile(request.profile_in, "profile"), request.profile_in);
    CheckProfileMatches(result.profile, canonical.fingerprint, result.inputs, request.training, request.profile_in,
                        request.batch);
    CheckProfileDevice(result.profile,
                       request.device_profile.empty() ? "" : LoadDeviceProfile(request.device_profile).name,
                       request.device, request.profile_in);
    const std::vector<int64_t> sizes = SortedUnique(request.microbatch_sizes);
    if (!sizes.empty() && sizes != result.profile.microbatch_sizes) {
      throw InputError(Concat("--microbatch-sizes ", SizeList(request.microbatch_sizes), ": ", request.profile_in,
                              " was measured at ", SizeList(result.profile.microbatch_sizes),
                              "; to plan at others, profile again without --profile-in"));
    }
  } else if (!request.device_profile.empty()) {
    DeviceProfile device = LoadDeviceProfile(request.device_profile);
    if (request.calibrate) {
      const std::string here = request.device.rfind("cuda", 0) == 0 ? "cuda" : "cpu";
      if (device.type != here)
        throw InputError(Concat("--calibrate measures here (", here, ") to fit ", device.name,
                                "; that needs a device profile of the same type, not ", device.type));
      const auto start = std::chrono::steady_clock::now();
      const Profile measured = Measure(canonical, request, result.inputs, true);
      result.profiling_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const DeviceProfile fitted = CalibrateDevice(device, measured, result.graph);
      result.calibration = Concat("compute efficiency ", Fixed(device.compute_efficiency), " -> ",
                                  Fixed(fitted.compute_efficiency), ", memory efficiency ",
                                  Fixed(device.memory_efficiency), " -> ", Fixed(fitted.memory_efficiency),
                                  ", launch overhead ", Fixed(device.launch_overhead_us), " -> ",
                                  Fixed(fitted.launch_overhead_us), " us, fitted on ", measured.device);
      result.profile = AnalyticProfile(measured, result.graph, fitted);
      result.profile.source = "calibrated";
      result.profile.threads = measured.threads;
    } else {
      result.profile = AnalyticProfile(Measure(canonical, request, result.inputs, false), result.graph, device);
    }
  } else {
    const auto start = std::chrono::steady_clock::now();
    // Stages on CPU workers share this machine: measure how they slow
    // each other (contention.h).
    result.profile = Measure(canonical, request, result.inputs, true, request.stages);
    result.profiling_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (request.microbatch_sizes.empty()) {
      result.measure_sizes = [model, canonical_ptr, request, inputs = result.inputs,
                              scale = result.profile.pass_scale,
                              overhead = result.profile.node_overhead](const std::vector<int64_t>& sizes) {
        return Measure(*canonical_ptr, request, inputs, true, 1, sizes, scale, overhead);
      };
    }
  }

  if (request.measure_links && request.device_profile.empty() && !result.profile.process_link.Measured()) {
    request.measure_links(result.profile);
    // With the links, not into a profile read with them: planned twice
    // from one file, a model gets one plan.
    if (request.measure_allreduce && request.training && result.profile.allreduce_link.Measured()) {
      result.profile.allreduce_after_step =
          MeasureAllReduceAfterStep(canonical, result.inputs, result.profile, request.measure_allreduce);
    }
  }
  if (!request.profile_out.empty()) result.profile = SaveProfile(request, result.profile);
  return result;
}

Profile SaveProfile(const ProfileRequest& request, const Profile& profile) {
  const std::string yaml = ProfileToYaml(profile);
  WriteFileAtomically(request.profile_out, yaml, {request.model_path, request.profile_in, request.device_profile});
  // Plan from what the file holds (times to 6 digits), so that --profile-in
  // gives this same plan, not one that differs in the digits the file
  // leaves out.
  return ProfileFromYaml(yaml, request.profile_out);
}

}  // namespace mp
