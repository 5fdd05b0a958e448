// mpplan: plans pipeline-parallel execution of a TorchScript model.
// This main parses flags, calls one library function and turns mp::Error
// into one line on stderr and a non-zero exit.
#include <CLI/CLI.hpp>

#include <iostream>

#include "common/error.h"
#include "planner/inspect/inspect.h"
#include "planner/profile/profile_command.h"
#include "planner/profile/profile_format.h"

int main(int argc, char** argv) {
  CLI::App app{"mpplan: ahead-of-time pipeline planner for TorchScript models"};
  app.footer(
      "Examples:\n"
      "  mpplan build/models/resnet50.script.pt --inspect\n"
      "  mpplan model.pt --inspect --json --input float32[4,3,64,64]\n"
      "  mpplan build/models/mlp.script.pt --profile-only --profile-out mlp.profile.yaml\n"
      "  mpplan build/models/gpt.script.pt --profile-only --device-profile a100-80gb --json");
  std::string model;
  bool inspect = false;
  bool profile_only = false;
  bool json = false;
  bool quiet = false;
  std::string mode = "train";
  std::vector<std::string> inputs;
  mp::ProfileRequest request;
  app.add_option("model", model, "TorchScript model file (.pt)")->required();
  app.add_flag("--inspect", inspect, "print the canonical graph summary");
  app.add_flag("--profile-only", profile_only, "profile the model and print the per-layer costs");
  app.add_flag("--json", json, "print one JSON object instead of text");
  app.add_flag("--quiet", quiet, "no progress bar");
  app.add_option("--input", inputs,
                 "input spec dtype[d0,d1,...], once per model input in order "
                 "(default: the spec embedded in the model)")
      ->take_last()
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--mode", mode, "train (forward and backward) or infer (forward only)")
      ->check(CLI::IsMember({"train", "infer"}))
      ->default_str("train");
  app.add_option("--batch", request.batch, "batch size (default: the input spec's)");
  app.add_option("--gpus", request.stages, "devices the plan will use; CPU stages share this machine's cores")
      ->default_str("1");
  app.add_option("--threads", request.threads, "intra-op threads to profile with (default: cores / --gpus)");
  app.add_option("--microbatch-sizes", request.microbatch_sizes,
                 "micro-batch sizes to measure, e.g. 1,8,32,120 (default: 1, B^1/3, B^2/3, B)")
      ->delimiter(',');
  app.add_option("--warmup", request.timing.warmup, "discarded runs before timing each node")->default_str("1");
  app.add_option("--repeats", request.timing.repeats, "timed samples per node; the median is kept")
      ->default_str("5");
  app.add_option("--device", request.device, "device to measure on: cpu, cuda, cuda:N")->default_str("cpu");
  app.add_option("--device-profile", request.device_profile,
                 "estimate for this device instead of measuring (profiles/: a100-80gb, h100-sxm, ... or a file)");
  app.add_flag("--calibrate", request.calibrate,
               "with --device-profile: fit its efficiencies to a measurement on this machine first");
  app.add_option("--profile-in", request.profile_in, "reuse a profile written by --profile-out");
  app.add_option("--profile-out", request.profile_out, "write the profile (YAML)");
  CLI11_PARSE(app, argc, argv);

  try {
    if (inspect) {
      const mp::GraphSummary summary = mp::InspectModel(model, inputs);
      std::cout << (json ? mp::SummaryToJson(summary).dump() + "\n" : mp::FormatSummary(summary));
      return 0;
    }
    if (!profile_only) {
      throw mp::InputError("planning is not available yet; use --inspect or --profile-only");
    }
    if (request.stages < 1) throw mp::InputError(mp::Concat("--gpus must be at least 1, got ", request.stages));
    request.model_path = model;
    request.input_flags = inputs;
    request.training = mode == "train";
    request.progress = !quiet;
    const mp::ProfiledModel result = mp::ProfileModel(request);
    if (json) {
      nlohmann::json out;
      out["model"] = model;
      out["profile"] = mp::ProfileSummaryJson(result.profile, result.calibration, result.profiling_s);
      std::cout << out.dump() << "\n";
    } else {
      std::cout << mp::FormatProfile(result.profile, result.calibration, result.profiling_s);
    }
  } catch (const mp::Error& e) {
    std::cerr << "mpplan: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    // LibTorch errors carry a backtrace after the first line.
    const std::string what = e.what();
    std::cerr << "mpplan: internal error: " << what.substr(0, what.find('\n')) << "\n";
    return 3;
  }
  return 0;
}
