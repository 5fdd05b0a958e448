// `mpexec PLAN` end to end: inference plans of the zoo run pipelined on CPU
// workers and give the outputs of the model run whole; a failing stage ends
// the run with its stage and micro-batch; a changed model is refused.
#include "tests/doctest_torch.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "../graph/zoo.h"
#include "../mpexec_in_process.h"
#include "../mpplan_in_process.h"
#include "../run_tool.h"
#include "common/atomic_file.h"
#include "common/cpu_affinity.h"
#include "common/sha256.h"
#include "tests/report/report_lines.h"

using mp::test::TempPath;
using mp::test::ZooPath;

namespace {

mp::test::ToolRun Mpplan(const std::string& args) { return mp::test::MpplanInProcess(args); }
mp::test::ToolRun Mpexec(const std::string& args) { return mp::test::MpexecCpuInProcess(args); }

std::string Plan(const std::string& model, const std::string& name, const std::string& flags) {
  const std::string out = TempPath(name + ".plan.yaml");
  const auto run = Mpplan(model + " --quiet --device-profile a100-80gb -o " + out + " " + flags);
  INFO(run.out);
  REQUIRE(run.status == 0);
  return out;
}

// The zoo models whose turn is `stages` (ZooFilesAt: each at one of 2, 3
// and 4) in inference over that many stages, bit for bit.
void InferZooModelsAt(int stages) {
  for (const std::string& file : mp::test::ZooFilesAt(mp::test::ZooFiles(), {2, 3, 4}, stages, 1)) {
    CAPTURE(file);
    const std::string plan =
        Plan(ZooPath(file), file + ".exec" + std::to_string(stages),
             "--mode infer --gpus " + std::to_string(stages) + " --stages " + std::to_string(stages) +
                 " --microbatches 2" + mp::test::SmallResNetInput(file));
    const auto run = Mpexec(plan + " --verify --json");
    INFO(run.out);
    REQUIRE(run.status == 0);
    const auto j = nlohmann::json::parse(run.out);
    CHECK(j["verify"] == true);  // bit for bit against the same micro-batches run whole
    CHECK(j["verify_detail"]["max_abs_diff"] == 0.0);
    CHECK(j["verify_detail"]["tensors"].get<int>() >= 1);
    CHECK(j["verify_detail"].contains("full_batch_max_abs_diff"));
    REQUIRE(j["stages"].size() == size_t(stages));
    for (const auto& stage : j["stages"]) {
      CHECK(stage["busy_ms"].get<double>() > 0);
      CHECK(stage["idle_ms"].get<double>() >= 0);
    }
    CHECK(j["samples_per_s"].get<double>() > 0);
    CHECK(j["microbatches"] == 2);
    CHECK(j["step_ms"].get<double>() > 0);
  }
}

}  // namespace

TEST_CASE("inference plans of a third of the zoo at 2 stages (the rest at 3 and 4) run pipelined and match the model run whole") {
  InferZooModelsAt(2);
}

TEST_CASE("inference plans of a third of the zoo at 3 stages (the rest at 2 and 4) run pipelined and match the model run whole") {
  InferZooModelsAt(3);
}

TEST_CASE("inference plans of a third of the zoo at 4 stages (the rest at 2 and 3) run pipelined and match the model run whole") {
  InferZooModelsAt(4);
}

TEST_CASE("a plan measured here reports measured against predicted") {
  const std::string plan = TempPath("mlp.measured.plan.yaml");
  const auto made = Mpplan(ZooPath("mlp.script.pt") + " --quiet --mode infer --gpus 2 --warmup 0 --repeats 2 -o " + plan);
  REQUIRE(made.status == 0);
  const auto run = Mpexec(plan + " --steps 3 --verify --json");
  INFO(run.out);
  REQUIRE(run.status == 0);
  const auto j = nlohmann::json::parse(run.out);
  CHECK(j["verify"] == true);
  CHECK(j["steps"] == 3);
  // Every timed step, in order; the median of them is step_ms.
  REQUIRE(j["steps_ms"].size() == 3);
  std::vector<double> steps = j["steps_ms"].get<std::vector<double>>();
  std::sort(steps.begin(), steps.end());
  CHECK(j["step_ms"].get<double>() == steps[1]);
  CHECK(j["predicted_step_ms"].get<double>() > 0);
  // The machine's speed now against when profiled is reported, and with
  // --rescale scales the prediction and its band; the text report says both.
  REQUIRE(j.contains("drift"));
  const double factor = j["drift"]["factor"].get<double>();
  CHECK(factor > 0);
  CHECK(j["drift"]["reference_ms"].get<double>() == doctest::Approx(factor * j["drift"]["profiled_reference_ms"].get<double>()));
  CHECK(j["predicted_step_ms"] == j["planned_step_ms"]);
  const auto rescaled = Mpexec(plan + " --steps 1 --rescale --json");
  REQUIRE(rescaled.status == 0);
  const auto r = nlohmann::json::parse(rescaled.out);
  CHECK(r["predicted_step_ms"].get<double>() ==
        doctest::Approx(r["drift"]["factor"].get<double>() * r["planned_step_ms"].get<double>()));
  CHECK(r["predicted_band_ms"][1].get<double>() ==
        doctest::Approx(r["drift"]["factor"].get<double>() * j["predicted_band_ms"][1].get<double>()));
  REQUIRE(j.contains("predicted_band_ms"));
  const double low = j["predicted_band_ms"][0], high = j["predicted_band_ms"][1], step = j["step_ms"];
  CHECK(low <= j["predicted_step_ms"].get<double>());
  CHECK(j["predicted_step_ms"].get<double>() <= high);
  CHECK(j["in_band"] == (low <= step && step <= high));
  const auto text = Mpexec(plan + " --steps 1 --verify");
  REQUIRE(text.status == 0);
  CHECK(text.out.find("ms now") != std::string::npos);
  // The full batch in one go: the same outputs, or by how much they differ
  // (never "differs by at most 0").
  const double full_batch = j["verify_detail"]["full_batch_max_abs_diff"].get<double>();
  CHECK(text.out.find("verify      outputs equal, bit for bit, the model run whole on the same micro-batches; the "
                      "full batch in one go ") != std::string::npos);
  CHECK(text.out.find("in one go differs by at most 0\n") == std::string::npos);
  if (full_batch == 0) CHECK(text.out.find("the full batch in one go gives the same outputs\n") != std::string::npos);
  // Run with another thread count than the profile's, the report says the
  // predictions are for the profile's.
  const int profiled = j["profile_threads"].get<int>();
  REQUIRE(profiled >= 1);
  CHECK(j["threads_per_stage"] == profiled);
  CHECK(text.out.find("threads     ") == std::string::npos);
  const auto other = Mpexec(plan + " --steps 1 --threads-per-stage " + std::to_string(profiled + 1));
  REQUIRE(other.status == 0);
  CHECK(other.out.find("threads     " + std::to_string(profiled + 1) + " per stage, where the profile timed " +
                       std::to_string(profiled) + ": the predictions are for " + std::to_string(profiled)) !=
        std::string::npos);
  CHECK((text.out.find(", inside the band)") != std::string::npos || text.out.find(", outside the band)") != std::string::npos));
  // The plan is this machine's: it runs without --device.
  const auto plain = mp::test::RunTool(MP_MPEXEC, plan + " --steps 1 --json");
  REQUIRE(plain.status == 0);
  CHECK(nlohmann::json::parse(plain.out)["step_error_pct"].is_number());
  MESSAGE("mlp, measured plan: " << j["stages"].size() << " stages x " << j["microbatches"] << ", step " << j["step_ms"]
                                 << " ms, predicted " << j["predicted_step_ms"] << " ms");
}

TEST_CASE("mpexec times its drift reference on each CPU worker's cores, and pins the workers there with MP_PIN_CPUS=1") {
  const std::string plan = TempPath("lstm.pinned.plan.yaml"), profile = TempPath("lstm.pinned.profile.yaml");
  const std::string pin = "MP_PIN_CPUS=1 ";
  const auto made = mp::test::RunTool(pin + MP_MPPLAN, ZooPath("lstm.script.pt") +
                                                           " --quiet --gpus 2 --stages 2 --threads 1 --warmup 0 "
                                                           "--repeats 2 --profile-out " + profile + " -o " + plan);
  INFO(made.out);
  REQUIRE(made.status == 0);
  const auto run = mp::test::RunTool(pin + MP_MPEXEC, plan + " --steps 2 --warmup 0 --json");
  INFO(run.out);
  REQUIRE(run.status == 0);
  const auto j = nlohmann::json::parse(run.out);
  std::ifstream in(profile);
  const std::string profile_text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::vector<int>& allowed = mp::AllowedCpus();
  // Pinning off (the default): the same plan runs where the scheduler puts
  // it, and the reference is still timed on each worker's cores.
  const auto free = mp::test::RunTool("MP_PIN_CPUS=0 " MP_MPEXEC, plan + " --steps 1 --warmup 0 --json");
  REQUIRE(free.status == 0);
  const auto f = nlohmann::json::parse(free.out);
  CHECK(f["workers_pinned"] == false);
  if (allowed.size() < 2) {
    // One core for two workers: nobody is pinned, nothing per worker.
    CHECK(j["workers_pinned"] == false);
    CHECK(!j["drift"].contains("worker_factors"));
    CHECK(profile_text.find("worker_speed") == std::string::npos);
    return;
  }
  CHECK(j["workers_pinned"] == true);
  CHECK(j["drift"]["samples"] == 5 + 2);  // before the steps, and after each of the 2: one thread everywhere
  const auto blocks = nlohmann::json::array({std::to_string(allowed[0]), std::to_string(allowed[1])});
  CHECK(j["drift"]["worker_cpus"] == blocks);
  REQUIRE(j["drift"]["worker_factors"].size() == 2);
  CHECK(j["drift"]["worker_factors"][0] == j["drift"]["factor"]);
  CHECK(j["drift"]["worker_factors"][1].get<double>() > 0);
  CHECK(f["drift"]["worker_cpus"] == blocks);
  CHECK(profile_text.find("worker_speed: [1, ") != std::string::npos);
  const auto text = mp::test::RunTool(pin + MP_MPEXEC, plan + " --steps 1 --warmup 0");
  CHECK(text.out.find("cores       drift reference per core, now / profiled: cpu " + std::to_string(allowed[0])) !=
        std::string::npos);
  CHECK(text.out.find("(worker w pinned to the w-th)") != std::string::npos);
}

TEST_CASE("a plan profiled with 2 threads a stage, run with 1: the drift reference runs with the profile's 2 "
          "threads where they fit, not pinned to the one core of a worker") {
  const std::string plan = TempPath("toy.threads2.plan.yaml");
  const auto made = mp::test::RunTool(MP_MPPLAN, ZooPath("toy.script.pt") + " --quiet --gpus 1 --threads 2 --warmup 0 "
                                                                            "--repeats 2 -o " + plan);
  INFO(made.out);
  REQUIRE(made.status == 0);
  const auto run =
      mp::test::RunTool("MP_PIN_CPUS=1 " MP_MPEXEC, plan + " --steps 3 --warmup 1 --json --threads-per-stage 1");
  INFO(run.out);
  REQUIRE(run.status == 0);
  const auto j = nlohmann::json::parse(run.out);
  CHECK(j["profile_threads"] == 2);
  // Not per worker: its 2 threads pinned to the worker's one core read
  // 100-270x the profile's time. (Not checked as a time: unpinned, beside
  // another test on the other core, the 2 threads read 25x once.)
  CHECK(!j["drift"].contains("worker_factors"));
  // Sampled before the steps only: one after a step would set the calling
  // thread's count to 2 and back, which the next step would pay for.
  CHECK(j["drift"]["samples"] == 5);
  // With the profile's count, the reference is timed on the worker's cores
  // where they are cores enough.
  const auto same = mp::test::RunTool("MP_PIN_CPUS=1 " MP_MPEXEC, plan + " --steps 3 --warmup 1 --json");
  REQUIRE(same.status == 0);
  const auto s = nlohmann::json::parse(same.out);
  CHECK(s["drift"].contains("worker_factors") == (mp::AllowedCpus().size() >= 2));
}

TEST_CASE("a plan for devices that are not here is refused, and runs on CPU workers with --device cpu without an "
          "error figure" * mp::test::NotUnderTsan()) {
  const std::string plan = Plan(ZooPath("mlp.script.pt"), "mlp.a100", "--mode infer --gpus 2 --stages 2");
  const auto refused = mp::test::RunTool(MP_MPEXEC, plan + " --steps 1");
  CHECK(refused.status == 1);
  CHECK(refused.out == "mpexec: " + plan + ": devices: planned for 2 \xC3\x97 A100-80GB (cuda) with times analytic on A100-80GB, "
                       "not for this machine's CPU workers: run it on CPU workers for checking with --device cpu, or "
                       "plan for them here (mpplan MODEL --gpus 2, without --device-profile)\n");
  const auto auto_device = mp::test::RunTool(MP_MPEXEC, "--device auto " + plan);
  CHECK(auto_device.status == 1);
  CHECK(auto_device.out == refused.out);
  // With --device cpu it runs and checks (bit for bit), but compares no time
  // with the A100 prediction.
  const auto run = Mpexec(plan + " --steps 1 --verify --json");
  INFO(run.out);
  REQUIRE(run.status == 0);
  const auto j = nlohmann::json::parse(run.out);
  CHECK(j["verify"] == true);
  CHECK(j["predicted_for"] == "2 \xC3\x97 A100-80GB (cuda)");
  CHECK(j["predicted_from"] == "analytic on A100-80GB");
  CHECK(j["step_error_pct"].is_null());
  CHECK(j["measured_vs_predicted"].is_null());
  for (const auto& stage : j["stages"]) CHECK(stage["busy_error_pct"].is_null());
  CHECK(j["predicted_step_ms"].get<double>() > 0);  // the plan's own figure, for the devices it names
  CHECK_FALSE(j.contains("drift"));                 // a device profile has no samples: no band, no drift
  CHECK_FALSE(j.contains("predicted_band_ms"));
  const auto text = Mpexec(plan + " --steps 1");
  REQUIRE(text.status == 0);
  CHECK(text.out.find("ms measured on CPU workers; the plan predicts ") != std::string::npos);
  CHECK(text.out.find(" for 2 \xC3\x97 A100-80GB (cuda), analytic on A100-80GB: not comparable\n") != std::string::npos);
  CHECK(text.out.find('%') == std::string::npos);  // no error percentage anywhere
}

TEST_CASE("by default two warm-up steps run first, and the cold first step is reported apart, and the heap's peak is "
          "sampled in the last warm-up step, or in the timed steps without one, from the malloc mpexec was linked "
          "with") {
  const std::string plan = Plan(ZooPath("mlp.script.pt"), "mlp.warm", "--gpus 2 --stages 2 --microbatches 2");
  const auto run = mp::test::RunTool(MP_MPEXEC, "--device cpu " + plan + " --json");
  INFO(run.out);
  REQUIRE(run.status == 0);
  const auto j = nlohmann::json::parse(run.out);
  CHECK(j["warmup"] == 2);
  CHECK(j["steps_ms"].size() == 1);
  CHECK(j["losses"].size() == 3);  // the warm-up steps train too
  CHECK(j["first_step_ms"].get<double>() > 0);
  // The heap holds the model before the steps, and more during one (the
  // micro-batches' activations); a sanitizer's heap reads as nothing.
  const auto heap_during = [](const nlohmann::json& memory) {
    if (memory["before_steps_bytes"].get<int64_t>() <= 0) return true;
    return memory["peak_bytes"].get<int64_t>() > memory["before_steps_bytes"].get<int64_t>();
  };
  CHECK(heap_during(j["memory"]));
  // jemalloc where the build found it (CMake's MP_JEMALLOC): its malloc,
  // not glibc's, serves every library's calls, and its figures are read.
  const std::string allocator = j["memory"]["allocator"].get<std::string>();
  if (MP_JEMALLOC_LINKED) {
    CHECK(allocator == "jemalloc");
    CHECK(j["memory"]["before_steps_bytes"].get<int64_t>() > 0);
  } else {
    CHECK(allocator != "jemalloc");
  }
  const auto cold_json = mp::test::RunTool(MP_MPEXEC, "--device cpu " + plan + " --warmup 0 --steps 2 --json");
  REQUIRE(cold_json.status == 0);
  CHECK(heap_during(nlohmann::json::parse(cold_json.out)["memory"]));
  const auto text = mp::test::RunTool(MP_MPEXEC, "--device cpu " + plan);
  REQUIRE(text.status == 0);
  CHECK(text.out.find("median of 1 step(s) after 2 warm-up (the first, cold, took ") != std::string::npos);
  CHECK(text.out.find(" MiB before the steps; " + allocator + "'s malloc; ") != std::string::npos);
  CHECK(text.out.find(" MiB resident at most); the plan predicts ") != std::string::npos);
  const auto cold = mp::test::RunTool(MP_MPEXEC, "--device cpu " + plan + " --warmup 0");
  REQUIRE(cold.status == 0);
  CHECK(cold.out.find("after 0 warm-up\n") != std::string::npos);
}

// What a step frees serves the next step's blocks, whoever serves malloc:
// under jemalloc alone (freed pages kept) the GPT's GPipe plan at 8
// micro-batches grew 12 MiB a step, its freed blocks of 64 KiB to 1 MiB
// never reused (common/allocator.h's KeptHeapAlloc says what mends it).
TEST_CASE("a GPipe plan's resident memory holds still over the steps") {
  if (mp::kUnderSanitizer) return;  // a sanitizer's allocator quarantines what is freed
  const std::string plan = Plan(ZooPath("gpt.script.pt"), "gpt.gpipe.resident",
                                "--gpus 2 --stages 2 --replicas 1 --batch 16 --microbatches 8 --schedule gpipe");
  const auto resident = [&](int steps) {
    const auto run = mp::test::RunTool(MP_MPEXEC, "--device cpu " + plan + " --steps " + std::to_string(steps) +
                                                      " --json");
    INFO(run.out);
    REQUIRE(run.status == 0);
    return nlohmann::json::parse(run.out)["memory"]["peak_resident_bytes"].get<int64_t>();
  };
  const int64_t few = resident(3), many = resident(25);
  CAPTURE(few);
  CAPTURE(many);
  CHECK(few > 0);
  CHECK(many - few < (int64_t(32) << 20));  // jemalloc alone: 221 MiB more
}

TEST_CASE("the first failing stage ends the run with its stage and micro-batch, without hanging") {
  const std::string plan = Plan(ZooPath("mlp.script.pt"), "mlp.broken",
                                "--mode infer --gpus 3 --stages 3 --microbatches 4");
  // The model's first linear layer takes 512 features; give it 100.
  std::string text = mp::ReadTextFile(plan);
  const size_t at = text.find("shape: [64, 512]");
  REQUIRE(at != std::string::npos);
  text.replace(at, 16, "shape: [64, 100]");
  const std::string broken = TempPath("mlp.broken.edited.plan.yaml");
  std::ofstream(broken) << text;
  const auto run = Mpexec(broken);
  INFO(run.out);
  CHECK(run.status == 1);
  CHECK(run.out.rfind("mpexec: stage 0, micro-batch 0: ", 0) == 0);
  CHECK(run.out.find("mat1 and mat2 shapes cannot be multiplied") != std::string::npos);  // the operator's own words
  CHECK(std::count(run.out.begin(), run.out.end(), '\n') == 1);
}

TEST_CASE("inference of a model with an output that does not grow with the batch is planned in one micro-batch "
          "without replicas, says so, and runs") {
  // (relu(x) * 2, x.pow(2).mean()): the mean cannot be joined from
  // micro-batches' or replicas' means. Measured here: the search would
  // otherwise be free to choose either.
  const std::string out = TempPath("batch_mean.plan.yaml");
  const auto planned = Mpplan(ZooPath("fixtures/batch_mean.pt") + " --gpus 2 --mode infer --input 'float32[8,3]' "
                              "--repeats 1 --warmup 0 -o " + out);
  INFO(planned.out);
  REQUIRE(planned.status == 0);
  CHECK(planned.out.find("warning: output 0's tensor 1 (shape []) does not grow with the batch, so its micro-batches "
                         "and replicas cannot be joined: planned with 1 micro-batch and no replicas") !=
        std::string::npos);
  const std::string text = mp::ReadTextFile(out);
  CHECK(text.find("\nmicrobatches: 1\n") != std::string::npos);
  CHECK(text.find("\nreplicas:") == std::string::npos);  // written only above 1
  const auto run = Mpexec(out + " --verify --json");
  INFO(run.out);
  REQUIRE(run.status == 0);
  CHECK(nlohmann::json::parse(run.out)["verify"] == true);
}

// heldout/normalized_policy: its observation normaliser writes its running
// mean and variance at every forward, in inference too; --verify checked
// the median step's outputs against the model run whole from the state the
// steps had left. heldout/sn_discriminator (spectral_norm's power
// iteration, traced in training mode, `out=` into its buffers) read 0.017
// off so, once planned: mpplan's shape probe ran it with autograd, which
// PyTorch refuses for it ("functions with out=... arguments don't support
// automatic differentiation"), and inference runs without.
TEST_CASE("inference of a model that writes its buffers at every forward is planned and verified from the state its "
          "step began from") {
  for (const std::string model : {"normalized_policy.script.pt", "sn_discriminator.trace_train.pt"}) {
   const std::string plan =
       Plan(ZooPath("heldout/" + model), model + ".infer", "--mode infer --gpus 2 --microbatches 2");
   for (const std::string steps : {" --steps 1", " --steps 3"}) {
    CAPTURE(model);
    CAPTURE(steps);
    const auto run = Mpexec(plan + steps + " --verify --json");
    INFO(run.out);
    REQUIRE(run.status == 0);
    const auto j = nlohmann::json::parse(run.out);
    CHECK(j["verify"] == true);
    CHECK(j["verify_detail"]["max_abs_diff"] == 0.0);
    if (model == "normalized_policy.script.pt")
      CHECK(j["verify_detail"]["full_batch_close"] == false);  // the whole batch's statistics are not 2 halves'
   }
  }
}

TEST_CASE("outputs that are not plain tensors infer over micro-batches and replicas, and Python reads them back") {
  // torchvision's GoogLeNet, scripted, returns (logits, aux2, aux1) with the
  // auxiliary logits Optional[Tensor]: None outside training, so in every
  // micro-batch and replica, and None in the joined outputs. Its LR-ASPP
  // returns {"out": logits at the input's size}, and its backbone gathers
  // features in an OrderedDict (aten::_set_item) that crosses the cut.
  struct Case {
    std::string name, python, printed;
  };
  for (const Case& c : {Case{"googlenet", "len(y), tuple(y[0].shape), y[1], y[2]", "3 (8, 10) None None\n"},
                        Case{"lraspp", "type(y).__name__, list(y), tuple(y['out'].shape)",
                             "dict ['out'] (8, 5, 64, 64)\n"}}) {
    for (const std::string layout : {"--stages 2 --microbatches 2", "--replicas 2 --stages 1 --microbatches 2"}) {
      CAPTURE(c.name);
      CAPTURE(layout);
      const std::string out = TempPath(c.name + ".out.pt");
      std::filesystem::remove(out);
      const std::string plan =
          Plan(ZooPath("heldout/" + c.name + ".script.pt"), c.name + ".infer", "--mode infer --gpus 2 " + layout);
      const auto run = Mpexec(plan + " --verify --json --output " + out);
      INFO(run.out);
      REQUIRE(run.status == 0);
      CHECK(nlohmann::json::parse(run.out.substr(run.out.find('{')))["verify"] == true);
      const auto read = mp::test::RunTool(
          MP_PYTHON, "-c \"import torch; y = torch.load('" + out + "'); print(" + c.python + ")\"");
      INFO(read.out);
      CHECK(read.out == c.printed);
    }
  }
}

TEST_CASE("a model's warnings.warn is printed once a process, not at every forward") {
  // GoogLeNet, scripted, warns at every forward outside training; the
  // interpreter printed it at each micro-batch of each step (12 lines for 3
  // steps of 2 micro-batches here, 160 in a measured mpplan), Python once.
  const std::string model = ZooPath("heldout/googlenet.script.pt");
  const std::string plan = TempPath("googlenet.warn.plan.yaml");
  const std::string warning = "warning: Scripted GoogleNet always returns GoogleNetOutputs Tuple (googlenet.py:";
  const auto planned = mp::test::RunTool(MP_MPPLAN, model + " --quiet --mode infer --gpus 2 --stages 2 --microbatches 2 "
                                                             "--device-profile a100-80gb -o " + plan);
  INFO(planned.out);
  REQUIRE(planned.status == 0);
  CHECK(mp::testing::Count(planned.out, warning) == 1);
  const auto run = mp::test::RunTool(MP_MPEXEC_CPU, plan + " --steps 3");
  INFO(run.out);
  REQUIRE(run.status == 0);
  CHECK(mp::testing::Count(run.out, warning) == 1);
  CHECK(mp::testing::Count(run.out, "GoogleNetOutputs") == 1);  // nor in c10's own form
}

TEST_CASE("a model changed since planning is refused" * mp::test::NotUnderTsan()) {
  std::filesystem::create_directories(TempPath("changed"));
  const std::string model = TempPath("changed/model.pt");
  std::filesystem::copy_file(ZooPath("toy.script.pt"), model, std::filesystem::copy_options::overwrite_existing);
  const std::string plan = Plan(model, "changed/model", "--mode infer --gpus 2");
  std::filesystem::copy_file(ZooPath("toy.trace.pt"), model, std::filesystem::copy_options::overwrite_existing);
  const auto run = Mpexec(plan);
  CHECK(run.status == 1);
  CHECK(run.out.find("model.sha256: ") != std::string::npos);
  CHECK(run.out.find("has changed since it was planned") != std::string::npos);
}

TEST_CASE("--model runs the plan on a checkpoint of the same graph: training goes on from its weights" *
          mp::test::NotUnderTsan()) {
  std::filesystem::create_directories(TempPath("resume"));
  const std::string model = TempPath("resume/mlp.pt"), trained = TempPath("resume/mlp.trained.pt");
  std::filesystem::copy_file(ZooPath("mlp.script.pt"), model, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::remove(trained);
  const std::string plan = Plan(model, "resume/mlp", "--gpus 2 --stages 2 --batch 16 --microbatches 2");
  const std::string steps = " --steps 2 --json";  // the plan's Adam, lr 0.001
  const auto first = Mpexec(plan + steps + " --save " + trained);
  INFO(first.out);
  REQUIRE(first.status == 0);
  // The checkpoint is not the planned file (sha256), but its graph is.
  const auto refused = Mpexec(plan + " --model " + TempPath("resume/missing.pt"));
  CHECK(refused.status == 1);
  CHECK(refused.out.find("--model " + TempPath("resume/missing.pt") + ": no such file") != std::string::npos);
  const auto resumed = Mpexec(plan + steps + " --verify --model " + trained);
  INFO(resumed.out);
  REQUIRE(resumed.status == 0);
  const auto a = nlohmann::json::parse(first.out), b = nlohmann::json::parse(resumed.out);
  CHECK(b["model"] == trained);
  CHECK(b["model_given"] == true);
  CHECK(b["verify"] == true);
  // Synthetic inputs and labels are the same in both runs: the resumed run's
  // first loss is below the first run's, its weights having trained.
  CHECK(b["losses"][0].get<double>() < a["losses"][0].get<double>());
  // The report says which model ran.
  const auto text = Mpexec(plan + " --model " + trained);
  CHECK(text.out.find("model       " + trained + " (--model: the plan's canonical graph, its own weights)\n") !=
        std::string::npos);
  // Another graph is refused, naming --model; the plan's own model is never
  // written over, --model or not.
  const auto other = Mpexec(plan + " --model " + ZooPath("toy.script.pt"));
  CHECK(other.status == 1);
  CHECK(other.out.find("mpexec: --model " + ZooPath("toy.script.pt") + ": its canonical graph (") == 0);
  const auto over = Mpexec(plan + " --model " + trained + " --save " + model);
  CHECK(over.status != 0);
  CHECK(mp::Sha256File(model) == mp::Sha256File(ZooPath("mlp.script.pt")));
}

TEST_CASE("--input takes a dict of tensors by input name, as a Hugging Face batch is, and refuses a key the plan "
          "lacks" * mp::test::NotUnderTsan()) {
  // heldout/bert_style planned with input_ids and token_type_ids, its
  // attention_mask left out (named inputs, bound by name).
  const std::string plan = Plan(ZooPath("heldout/bert_style.script.pt"), "bert_style.dict",
                                "--mode infer --gpus 2 --stages 2 --microbatches 2 --input token_type_ids=int64[8,16] "
                                "--input input_ids=int64[8,16]");
  const std::string dict = TempPath("bert_style.dict.pt"), tuple = TempPath("bert_style.tuple.pt"),
                    extra = TempPath("bert_style.extra.pt"), short_of = TempPath("bert_style.short.pt");
  const auto saved = mp::test::RunTool(
      MP_PYTHON, "-c \"import torch; torch.manual_seed(2); i = torch.randint(0, 400, (8, 16)); "
                 "t = torch.randint(0, 2, (8, 16)); m = torch.ones(8, 16, dtype=torch.long); "
                 "torch.save({'token_type_ids': t, 'input_ids': i}, '" + dict + "'); torch.save((i, t), '" + tuple +
                 "'); torch.save({'input_ids': i, 'token_type_ids': t, 'attention_mask': m}, '" + extra +
                 "'); torch.save({'input_ids': i, 'attention_mask': m}, '" + short_of + "')\"");
  REQUIRE(saved.status == 0);
  const std::string by_name = TempPath("bert_style.dict.out.pt"), by_place = TempPath("bert_style.tuple.out.pt");
  std::filesystem::remove(by_name);
  std::filesystem::remove(by_place);
  const auto a = Mpexec(plan + " --input " + dict + " --output " + by_name);
  INFO(a.out);
  REQUIRE(a.status == 0);
  const auto b = Mpexec(plan + " --input " + tuple + " --output " + by_place);
  REQUIRE(b.status == 0);
  // The dict's order is not the plan's; the outputs are the tuple's, bit
  // for bit, and the model's own on the same ids and types (the
  // attention_mask None), to float rounding.
  const auto compared = mp::test::RunTool(
      MP_PYTHON, "-c \"import torch; m = torch.jit.load('" + ZooPath("heldout/bert_style.script.pt") +
                 "'); m.eval(); x = torch.load('" + dict + "'); a = torch.load('" + by_name + "'); b = torch.load('" +
                 by_place + "'); y = torch.cat([m(x['input_ids'][k:k + 4], None, x['token_type_ids'][k:k + 4]) "
                 "for k in (0, 4)]); print(torch.equal(a, b), torch.allclose(a, y, atol=1e-6))\"");
  INFO(compared.out);
  CHECK(compared.out == "True True\n");
  // An attention_mask the plan was made without would be dropped: refused.
  const auto more = Mpexec(plan + " --input " + extra);
  CHECK(more.status == 1);
  CHECK(more.out.find("'attention_mask' is not one of the plan's inputs (input_ids, token_type_ids)") !=
        std::string::npos);
  const auto fewer = Mpexec(plan + " --input " + short_of);
  CHECK(fewer.status == 1);
  CHECK(fewer.out.find("the dict has no 'token_type_ids'") != std::string::npos);
}

TEST_CASE("--input and --output exchange tensors with Python's torch.save and torch.load" * mp::test::NotUnderTsan()) {
  const std::string in = TempPath("lstm.in.pt"), out = TempPath("lstm.out.pt");
  std::filesystem::remove(out);
  const std::string python = MP_PYTHON;
  const auto saved = mp::test::RunTool(
      python, "-c \"import torch; torch.manual_seed(1); torch.save((torch.randn(4,12,8), torch.randn(2,4,32), "
              "torch.randn(2,4,32)), '" + in + "')\"");
  REQUIRE(saved.status == 0);
  const std::string plan = Plan(ZooPath("lstm.script.pt"), "lstm.files", "--mode infer --gpus 2 --microbatches 2");
  const auto run = Mpexec(plan + " --input " + in + " --output " + out);
  INFO(run.out);
  REQUIRE(run.status == 0);
  // Python runs the model itself on the same micro-batches (the batch is
  // dimension 0 of x and of the output, 1 of the states) and compares, bit
  // for bit. (On the whole batch at once an optimised BLAS such as OpenBLAS
  // blocks the products differently and the last bits differ.)
  const auto compared = mp::test::RunTool(
      python, "-c \"import torch; m = torch.jit.load('" + ZooPath("lstm.script.pt") + "'); m.eval(); "
              "x = torch.load('" + in + "'); y = torch.load('" + out + "'); "
              "h = [m(x[0][i:i + 2], x[1][:, i:i + 2], x[2][:, i:i + 2]) for i in (0, 2)]; "
              "r = (torch.cat([a[0] for a in h]), (torch.cat([a[1][0] for a in h], 1), "
              "torch.cat([a[1][1] for a in h], 1))); "
              "print(torch.equal(r[0], y[0]) and torch.equal(r[1][0], y[1][0]) and torch.equal(r[1][1], y[1][1]))\"");
  INFO(compared.out);
  CHECK(compared.out == "True\n");

  // A file of another kind: the plan itself (this test's own file; another
  // test's raced with it when the tests ran in shards).
  const auto wrong = Mpexec(plan + " --input " + plan);
  CHECK(wrong.status == 1);
  CHECK(wrong.out.find("cannot read it as tensors saved with torch.save") != std::string::npos);
  const auto count = Mpexec(Plan(ZooPath("mlp.script.pt"), "mlp.files", "--mode infer --gpus 2") + " --input " + in);
  CHECK(count.out == "mpexec: --input " + in + ": 3 values, the model takes 1 (save a tuple with one tensor per input)\n");
  const auto overwrite = Mpexec(plan + " --output " + plan);
  CHECK(overwrite.status == 1);
  CHECK(overwrite.out.find("refusing to overwrite") != std::string::npos);
}
