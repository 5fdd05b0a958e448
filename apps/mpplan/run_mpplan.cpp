// mpplan's command line as a function: parses the flags, calls one
// library function (RunPlanCommand, InspectModel or ProfileModel), prints
// its result on `out`, and leaves failures to RunTool: one line on `err`
// and docs/errors.md's exit status. The main calls it with std::cout and
// std::cerr; the tests that make plans call it in their own process, which
// spares each plan LibTorch's start (0.7 s of CPU here, 3 s under ASan).
#include "apps/mpplan/run_mpplan.h"

#include <CLI/CLI.hpp>

#include "apps/command_line.h"
#include "apps/exit_status.h"
#include "common/byte_size.h"
#include "common/error.h"
#include "planner/command/plan_command.h"
#include "planner/command/plan_devices.h"
#include "planner/inspect/inspect.h"
#include "planner/profile/profile_format.h"
#include "planner/report/report_text.h"

namespace mp {

namespace {

// "auto" -> 0, else a positive integer; InputError naming the flag otherwise.
int AutoOrCount(const std::string& text, const std::string& flag) {
  if (text == "auto") return 0;
  size_t used = 0;
  int value = 0;
  try {
    value = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || value < 1) {
    throw InputError(Concat(flag, ": '", text, "' is not auto or a positive count"));
  }
  return value;
}

}  // namespace

int RunMpplan(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App app{
      "mpplan: ahead-of-time pipeline planner for TorchScript models.\n"
      "Profiles the model, partitions its graph into pipeline stages over N devices, picks the\n"
      "micro-batch count and schedule, and writes a plan for mpexec (MODEL.plan.yaml)."};
  app.footer(
      "Examples:\n"
      "  mpplan build/models/resnet50.script.pt --gpus 2\n"
      "      plan training on 2 workers of this machine, print the report\n"
      "  mpplan model.pt --gpus 4 --device-profile a100-80gb --report plan.md --dot plan.dot\n"
      "      plan for 4 A100s that are not here; Markdown report with a Gantt chart\n"
      "  mpplan model.pt --gpus 2 --split 'layer1,layer2|layer3,layer4,fc' --explain\n"
      "      also compare with a hand split, at every split size that divides the batch\n"
      "  mpplan model.pt --inspect            the canonical graph: inputs, layers, node kinds\n"
      "  mpplan model.pt --profile-only       per-layer forward/backward times and coverage");
  std::string model;
  bool inspect = false, profile_only = false, json = false, quiet = false, explain = false;
  std::string mode = "train", stages = "auto", microbatches = "auto", schedule = "auto", memory, replicas = "auto";
  std::vector<std::string> inputs;
  PlanCommandRequest request;
  ProfileRequest& profile = request.profile;
  app.add_option("model", model, "TorchScript model file (.pt)")->required();
  app.add_option("--gpus", request.gpus, "devices to plan for (CPU workers here, or --device-profile devices)")
      ->default_str("1");
  app.add_option("--replicas", replicas,
                 "data-parallel copies of the pipeline, each on --gpus / R devices (rounded down) with batch / R "
                 "samples; gradients are all-reduced among them. auto: the search chooses R with the stages, "
                 "micro-batches and schedule; mpexec runs a plan with replicas as one process per device")
      ->default_str("auto");
  app.add_option("--stages", stages, "pipeline stages: auto (1 to --gpus / --replicas) or a count")->default_str("auto");
  app.add_flag("--processes", request.processes,
               "CPU workers: plan for every device as its own process (mpexec --launch-local with one rank per "
               "device, or torchrun), charging messages between stages what a probe measures over Gloo on "
               "loopback; without it, stages are threads of one process (where the plan may have replicas, which "
               "run as processes, their all-reduce and a copy's messages are probed and charged)");
  app.add_option("--microbatches", microbatches, "micro-batches per step: auto or a count")->default_str("auto");
  double tie_percent = 100 * kDefaultTieTolerance;
  app.add_option("--tie-tolerance", tie_percent,
                 "with a profile measured here, plans predicted within this many percent of the fastest (or within "
                 "the profile's noise, if wider; between plans with micro-batches of one size, this alone) are ties "
                 "(a device profile's estimates tie only when equal); the simplest is chosen: "
                 "fewer devices, fewer stages a replica (so more replicas; not counting interleaved chunks), fewer "
                 "recomputing, micro-batches of equal size, fewer micro-batches, then the faster schedule (where "
                 "equal: 1f1b, gpipe, interleaved-1f1b, zb-h1, zbv, dualpipev)")
      ->check(CLI::Range(0.0, 99.0))
      ->default_str("4");
  double device_percent = 100 * kDefaultDeviceTolerance;
  app.add_option("--device-tolerance", device_percent,
                 "a plan on more devices must be predicted faster than the best on fewer by more than this many "
                 "percent, on any profile; 0: the fastest, whatever it uses")
      ->check(CLI::Range(0.0, 99.0))
      ->default_str("2");
  std::string objective = "step";
  app.add_option("--objective", objective,
                 "what the plan minimises: step (the step time) or throughput-per-device (step x devices: the "
                 "most samples per second from each device used, for a user who pays per device)")
      ->check(CLI::IsMember({"step", "throughput-per-device"}))
      ->default_str("step");
  app.add_option("--schedule", schedule,
                 "gpipe, 1f1b, interleaved-1f1b, zb-h1, zbv, dualpipev or auto (training: the search tries all "
                 "six, interleaved with --chunks stages per device, zbv and dualpipev with 2 in a V); inference "
                 "always runs forward-only")
      ->check(CLI::IsMember({"gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zbv", "dualpipev", "auto"}))
      ->default_str("auto");
  app.add_option("--chunks", request.chunks,
                 "interleaved-1f1b (and auto's interleaved plans): stages per device (default 2)")
      ->check(CLI::Range(2, 64));
  std::string optimizer = "adam";
  app.add_option("--optimizer", optimizer,
                 "training: the optimizer the plan is for, whose state its memory holds and which mpexec runs: "
                 "adam or adamw (2 tensors per parameter), momentum (SGD with momentum: 1) or sgd (0)")
      ->check(CLI::IsMember({"adam", "adamw", "momentum", "sgd"}))
      ->default_str("adam");
  std::string recompute = "auto";
  app.add_option("--recompute", recompute,
                 "training: which stages drop their activations after the forward and run it again before the "
                 "backward: never, auto (only stages that would not fit --memory otherwise) or always (gpipe, 1f1b "
                 "and interleaved-1f1b; zb-h1, zbv and dualpipev keep their graphs)")
      ->check(CLI::IsMember({"never", "auto", "always"}))
      ->default_str("auto");
  app.add_option("--mode", mode, "train (forward and backward) or infer (forward only)")
      ->check(CLI::IsMember({"train", "infer"}))
      ->default_str("train");
  app.add_option("--batch", profile.batch, "batch size (default: the input spec's)");
  app.add_option("--input", inputs,
                 "input spec dtype[d0,d1,...], once per model input in forward's order, or "
                 "name=dtype[d0,d1,...] in any order (default: the spec embedded in the model)")
      ->take_last()
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--device-profile", profile.device_profile,
                 "plan for devices that are not here: a bundled profile (a100-80gb, h100-sxm, v100, t4, ...) "
                 "or a YAML file");
  app.add_option("--memory", memory, "memory limit per device, e.g. 40GiB, 512MiB (default: the device's)");
  double headroom_percent = kDefaultMemoryHeadroom * 100;
  app.add_option("--memory-headroom", headroom_percent,
                 "percent of each device's memory the plan leaves free for what the memory model may miss "
                 "(allocator rounding and fragmentation, the runtime's buffers)")
      ->check(CLI::Range(0.0, 90.0))
      ->default_str("5");
  app.add_option("--partitioner", request.partitioner, "dp (optimal), uniform, params, block, or layers (--split)")
      ->check(CLI::IsMember({"dp", "uniform", "params", "block", "layers"}))
      ->default_str("dp");
  app.add_option("--split", request.split,
                 "a hand split by layer names, e.g. 'layer1,layer2|layer3,layer4,fc': compared with the plan "
                 "(--explain), or used with --partitioner layers");
  app.add_option("--profile-in", profile.profile_in, "reuse a profile written by --profile-out");
  app.add_option("--profile-out", profile.profile_out, "write the profile (YAML)");
  app.add_option("-o,--output", request.output, "plan file (default: MODEL.plan.yaml beside the model)");
  app.add_option("--previous", request.previous,
                 "an earlier plan of this model on this machine whose stages, micro-batches and schedule are kept "
                 "while they stay a tie with the fastest (default: the plan -o replaces, where it was made for the "
                 "same graph, mode, batch, devices and profile; none: plan afresh)");
  app.add_option("--report", request.report, "write a Markdown report, with an SVG Gantt chart beside it");
  app.add_option("--dot", request.dot, "write the op graph grouped by layer, coloured by stage (Graphviz)");
  app.add_flag("--explain", explain, "also print every alternative tried and the comparison with the baselines");
  app.add_flag("--json", json, "print one JSON object instead of the report");
  app.add_flag("--quiet", quiet, "no progress bar");
  app.add_flag("--inspect", inspect, "only print the canonical graph summary");
  app.add_flag("--profile-only", profile_only, "only profile the model and print the per-layer costs");
  app.add_option("--threads", profile.threads, "intra-op threads to profile with (default: cores / --gpus)");
  app.add_option("--microbatch-sizes", profile.microbatch_sizes,
                 "micro-batch sizes to measure, e.g. 1,8,32,120 (default: 1, B^1/3, B^2/3, B)")
      ->delimiter(',');
  app.add_option("--warmup", profile.timing.warmup, "discarded runs before timing each node")->default_str("1");
  app.add_option("--repeats", profile.timing.repeats, "timed samples per node; the median is kept")->default_str("5");
  app.add_option("--device", profile.device, "device to measure on: cpu, cuda, cuda:N")->default_str("cpu");
  app.add_flag("--calibrate", profile.calibrate,
               "with --device-profile: fit its efficiencies to a measurement on this machine first");
  std::vector<const char*> argv{"mpplan"};
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  if (const auto status = ParseCommandLine(app, int(argv.size()), argv.data(), "mpplan", out, err)) return *status;

  return RunTool([&] {
    if (inspect) {
      const GraphSummary summary = InspectModel(model, inputs);
      out << (json ? SummaryToJson(summary).dump() + "\n" : FormatSummary(summary));
      return 0;
    }
    profile.model_path = model;
    profile.input_flags = inputs;
    profile.training = mode == "train";
    profile.progress = !quiet && !json;
    if (profile_only) {
      CheckGpus(request.gpus);
      profile.stages = request.gpus;
      const ProfiledModel result = ProfileModel(profile);
      if (json) {
        nlohmann::json summary;
        summary["model"] = model;
        summary["profile"] = ProfileSummaryJson(result.profile, result.calibration, result.profiling_s);
        out << summary.dump() << "\n";
      } else {
        out << FormatProfile(result.profile, result.calibration, result.profiling_s);
      }
      return 0;
    }
    request.tie_tolerance = tie_percent / 100;
    if (!profile.training && app.count("--optimizer") > 0) {
      throw InputError("--optimizer " + optimizer + ": inference keeps no optimizer state");
    }
    request.optimizer = optimizer;
    request.recompute = ParseRecompute(recompute);
    request.device_tolerance = device_percent / 100;
    if (objective != "step") request.objective = Objective::kThroughputPerDevice;
    request.stages = AutoOrCount(stages, "--stages");
    request.replicas = AutoOrCount(replicas, "--replicas");
    request.microbatches = AutoOrCount(microbatches, "--microbatches");
    if (schedule != "auto") request.schedule = ParseScheduleKind(schedule);
    if (!memory.empty()) request.memory_bytes = ParseByteSize(memory, "--memory");
    request.memory_headroom = headroom_percent / 100;
    const PlanCommandResult result = RunPlanCommand(request);
    if (json) {
      out << PlanResultJson(result).dump() << "\n";
    } else {
      out << FormatPlanReport(result.plan, explain);
      out << "plan written to " << result.plan_path << "\n";
      if (!request.report.empty()) out << "report written to " << request.report << " and " << result.svg_path << "\n";
      if (!request.dot.empty()) out << "graph written to " << request.dot << "\n";
    }
    return 0;
  }, [&](const std::string& line) { err << "mpplan: " << line << "\n"; });
}

}  // namespace mp
