// mpexec's command line as a function: parses the flags, calls
// RunExecCommand (or LaunchLocal for --launch-local) and prints what it
// measured next to what the plan predicted; failures become one line and
// the exit status RunTool gives them, a --verify mismatch exit 4. As one
// rank of several it prefixes its error with the rank, and under the
// launcher it hands result and error to it instead of printing. The main
// calls it with std::cout and std::cerr; the tests that run plans on
// threads call it in their own process, which spares each run LibTorch's
// start (0.7 s of CPU here, 2-3 s under ASan).
#include "apps/mpexec/run_mpexec.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "apps/command_line.h"
#include "apps/exit_status.h"
#include "common/error.h"
#include "executor/exec_command.h"
#include "executor/exec_report.h"
#include "executor/launch_local.h"
#include "executor/process_group.h"

namespace mp {

namespace {

// This process's rank when it is one of several, else -1 (a bad
// environment is reported by RunExecCommand).
int RankOrNone() {
  try {
    if (const auto env = RankEnvFromEnvironment()) return env->rank;
  } catch (const Error&) {
  }
  return -1;
}

// Prints a failure, or hands it to the launcher.
void Report(const std::string& what, std::ostream& err) {
  const int rank = RankOrNone();
  if (const auto folder = LauncherFolder()) {
    ReportToLauncher(*folder, std::max(rank, 0), "error", what);
    // Likely a consequence of another rank's failure: the launcher names
    // that one first.
    if (PeerFailureSeen()) ReportToLauncher(*folder, std::max(rank, 0), "peer", "1");
  } else {
    err << "mpexec: " << (rank >= 0 ? "rank " + std::to_string(rank) + ": " : "") << what << "\n";
  }
}

}  // namespace

int RunMpexec(const std::vector<std::string>& args, std::ostream& out, std::ostream& err, const std::string& self) {
  CLI::App app{"mpexec: runs an mpplan execution plan with micro-batch pipelining on CPU workers "
               "(inference, or training with any of mpplan's schedules and the plan's optimizer)"};
  app.footer(
      "Examples:\n"
      "  mpplan build/models/mlp.script.pt --gpus 2 --mode infer -o mlp.plan.yaml\n"
      "  mpexec mlp.plan.yaml --steps 5 --verify\n"
      "  mpplan build/models/mlp.script.pt --gpus 2 -o mlp.train.yaml\n"
      "  mpexec mlp.train.yaml --steps 3 --lr 0.01 --verify --save mlp.trained.pt --trace step.json\n"
      "  mpexec mlp.train.yaml --launch-local 2 --verify   (one process per stage, over c10d Gloo)\n"
      "  torchrun --nproc_per_node 2 --no_python mpexec mlp.train.yaml   (the same, torchrun's environment)");
  ExecCommandRequest request;
  std::string device = "auto", loss = "mse";
  bool json = false;
  int launch_local = 0;
  app.add_option("plan", request.plan, "plan file written by mpplan (.yaml)")->required();
  app.add_option("--device", device, "where the stages run: auto (the plan's devices, which must be this machine's "
                 "CPU workers) or cpu (CPU worker threads, also for a plan made for other devices, as a check)")
      ->check(CLI::IsMember({"cpu", "auto"}))
      ->default_str("auto");
  app.add_option("--threads-per-stage", request.options.pipeline.threads_per_stage,
                 "intra-op threads per stage (default: what the plan's profile was measured with)");
  app.add_option("--steps", request.steps, "steps to time; the median step is reported")->default_str("1");
  app.add_option("--warmup", request.warmup, "steps run first and not timed (they train, too); 0 times the cold "
                 "first step")->default_str(std::to_string(kDefaultWarmup));
  app.add_flag("--rescale", request.rescale,
               "scale the plan's predictions by the drift reference's time now over its time when profiled");
  app.add_option("--model", request.options.model, "run the plan on this model file instead of the plan's: the same "
                 "canonical graph with other weights (a checkpoint --save wrote); its graph is checked, not its sha256");
  app.add_option("--input", request.input, "model inputs saved with torch.save: a tensor, or a tuple with one per "
                 "input (default: synthetic inputs from the plan's spec)");
  app.add_option("--output", request.output, "inference: write the model's outputs in torch.save format");
  app.add_option("--loss", loss, "training loss on output 0, classes along its last dimension: mse (against one-hot "
                 "labels) or cross_entropy; or output: the loss the model computes and returns, its first "
                 "floating-point scalar output (nanoGPT's logits, loss = model(idx, targets))")->default_str("mse");
  app.add_option("--labels", request.labels, "training labels saved with torch.save (default: synthetic)");
  app.add_option("--seed", request.options.pipeline.seed,
                 "what random ops (dropout) draw: a function of the seed, step, micro-batch and op, "
                 "not of the plan")->default_str("0");
  OptimizerOptions& optimizer = request.options.training.optimizer;
  double momentum = 0, eps = 0, weight_decay = 0;
  std::vector<double> betas;
  app.add_option("--optimizer", optimizer.name, "training: sgd, momentum (SGD with momentum), adam or adamw, as "
                 "torch.optim computes them (default: the plan's, mpplan --optimizer, whose state its memory holds)")
      ->check(CLI::IsMember({"sgd", "momentum", "adam", "adamw"}));
  app.add_option("--lr", optimizer.lr, "learning rate")->default_str("0.001");
  app.add_option("--momentum", momentum, "SGD's momentum (default 0.9 with --optimizer momentum, else 0); given "
                 "without --optimizer, SGD runs");
  app.add_option("--betas", betas, "Adam's and AdamW's: the decay rates of the gradient's moments")
      ->expected(2)->delimiter(',')->default_str("0.9,0.999");
  app.add_option("--eps", eps, "Adam's and AdamW's: added to the denominator")->default_str("1e-08");
  app.add_option("--weight-decay", weight_decay, "L2 penalty (SGD, Adam) or decoupled weight decay (AdamW) "
                 "(default 0, AdamW 0.01)");
  app.add_option("--clip-grad-norm", optimizer.clip_grad_norm, "scale the gradients so that their total L2 norm "
                 "over every stage is at most this, before the optimizer's step, as "
                 "torch.nn.utils.clip_grad_norm_ (default: no clipping)");
  app.add_option("--save", request.save, "training: write the trained model as TorchScript (torch.jit.load reads it)");
  app.add_option("--save-optimizer", request.save_optimizer, "training: write the optimizer's state (Adam's moments, "
                 "SGD's momentum) with torch.save, by parameter name, to go on from with --load-optimizer");
  app.add_option("--load-optimizer", request.load_optimizer, "training: start from an optimizer state "
                 "--save-optimizer wrote (a run resumed with --model from what --save wrote)");
  app.add_option("--trace", request.trace, "write the median step as a Chrome trace (Perfetto), with the plan's "
                 "predicted timeline beside it");
  app.add_flag("--verify", request.verify, "compare with the model run whole on one device, same micro-batches: "
               "inference bit for bit, training's losses and state (SGD) or first step's gradients (Adam, AdamW) "
               "within 1e-5");
  app.add_flag("--json", json, "print one JSON object");
  app.add_option("--launch-local", launch_local, "run the stages as N processes on this machine, over c10d Gloo "
                 "(like torchrun --standalone --nproc-per-node N); output is prefixed with the rank");
  app.add_option("--timeout", request.timeout_s, "with several processes: seconds to wait for another rank before "
                 "failing with its name")->default_str("300");
  std::vector<const char*> argv{"mpexec"};
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  if (const auto status = ParseCommandLine(app, int(argv.size()), argv.data(), "mpexec", out, err)) return *status;
  const auto report = [&err](const std::string& line) { Report(line, err); };
  return RunTool([&] {
    request.options.training.loss = ParseLoss(loss);
    if (request.options.training.loss == LossKind::kOutput && !request.labels.empty()) {
      throw InputError("--labels: --loss output trains on the model's own loss, which takes no labels (give the "
                       "model its targets as an input)");
    }
    if (app.count("--momentum") > 0) optimizer.momentum = momentum;
    if (app.count("--betas") > 0) optimizer.betas = std::make_pair(betas.at(0), betas.at(1));
    if (app.count("--eps") > 0) optimizer.eps = eps;
    if (app.count("--weight-decay") > 0) optimizer.weight_decay = weight_decay;
    for (const char* flag : {"--optimizer", "--lr", "--momentum", "--betas", "--eps", "--weight-decay",
                             "--clip-grad-norm", "--loss", "--save-optimizer", "--load-optimizer"}) {
      if (app.count(flag) > 0) request.training_flags.push_back(flag);
    }
    request.cpu_workers = device == "cpu";
    // A plan with replicas runs over processes: without a launcher, as
    // --launch-local with one per device (the report's ranks line says so).
    const bool launch = app.count("--launch-local") > 0;
    if (!launch) launch_local = ProcessesToLaunch(request.plan);
    if (launch || launch_local > 0) {
      LaunchRequest launch{self, {}, launch_local, request.timeout_s, json};
      for (size_t i = 0; i < args.size(); ++i) {
        if (args[i] == "--launch-local") {
          ++i;
        } else if (args[i].rfind("--launch-local=", 0) != 0) {
          launch.args.push_back(args[i]);
        }
      }
      return LaunchLocal(launch, out, err);
    }
    const nlohmann::json result = RunExecCommand(request);
    if (result.is_null()) return 0;  // a rank other than 0: rank 0 reports
    if (const auto folder = LauncherFolder()) {
      ReportToLauncher(*folder, 0, "result", result.dump());
      ReportToLauncher(*folder, 0, "report", FormatExecReport(result));
    } else {
      out << (json ? result.dump() + "\n" : FormatExecReport(result));
    }
    return result.value("verify", true) ? 0 : 4;  // exit codes: docs/errors.md
  }, report);
}

}  // namespace mp
