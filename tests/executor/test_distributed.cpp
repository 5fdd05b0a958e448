// Stages as processes: `mpexec --launch-local N` and torchrun's environment
// run the zoo's plans over c10d Gloo on loopback and end where one process
// ends (verify against the model run whole on one device); a rank that
// dies, hangs or never arrives ends the run with one line naming it within
// the timeout; Ctrl-C on the launcher stops every rank.
#include "tests/doctest_torch.h"

#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "../graph/zoo.h"
#include "../mpexec_in_process.h"
#include "../mpplan_in_process.h"
#include "../run_tool.h"
#include "verified_run.h"
#include "common/atomic_file.h"
#include "common/cpu_affinity.h"
#include "executor/process_group.h"
#include "planner/plan/plan_reader.h"
#include "planner/profile/timer.h"

using mp::test::TempPath;
using mp::test::ZooPath;

namespace {

mp::test::ToolRun Mpplan(const std::string& args) { return mp::test::MpplanInProcess(args); }
mp::test::ToolRun Mpexec(const std::string& args) { return mp::test::MpexecCpuInProcess(args); }

// A plan of `file` (a path in the zoo's folder) for `batch` samples
// (ResNet-50 at 64x64) with mpplan's `flags`, written to a file named after
// `test`, the file and the flags: ctest runs test cases side by side.
std::string MakePlan(const std::string& test, const std::string& file, int batch, const std::string& flags) {
  std::string tag = flags, name = file;
  for (char& ch : tag) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  std::replace(name.begin(), name.end(), '/', '_');
  const std::string out = TempPath("dist." + test + "." + name + "." + tag + ".plan.yaml");
  const std::string resnet = mp::test::SmallResNetInput(file, batch);
  const std::string size = resnet.empty() ? " --batch " + std::to_string(batch) : resnet;
  const auto run = Mpplan(ZooPath(file) + " --quiet --device-profile a100-80gb" + size + " " + flags + " -o " + out);
  INFO(run.out);
  REQUIRE(run.status == 0);
  return out;
}

// `stages` stages x 2 micro-batches of 2.
std::string Plan(const std::string& test, const std::string& file, int stages, const std::string& flags) {
  const std::string k = std::to_string(stages);
  return MakePlan(test, file, 4, "--gpus " + k + " --stages " + k + " --microbatches 2 " + flags);
}

// 2 replicas of a `stages`-stage pipeline on 2 x `stages` devices, batch
// 8: 4 samples a replica in 2 micro-batches (BatchNorm needs 2 a batch).
std::string ReplicaPlan(const std::string& test, const std::string& file, int stages, const std::string& flags) {
  return MakePlan(test, file, 8, "--gpus " + std::to_string(2 * stages) + " --replicas 2 --stages " +
                                     std::to_string(stages) + " --microbatches 2 " + flags);
}

bool IsOneLine(const std::string& text) { return std::count(text.begin(), text.end(), '\n') == 1; }

// The zoo's TorchScript exports whose turn is `processes` (ZooFilesAt: each
// at one of 2, 3 and 4) over that many ranks, one stage each: each model
// either inference bit for bit, or training with gpipe or 1f1b, by turns
// over the models, so each count runs all three where it has three models.
// One run a model, not an inference and a training run: each takes a
// process per rank (test_mpexec and test_training run every model both
// ways on threads), and the sweep took two thirds of this test's time.
void RunZooOverProcesses(int processes) {
  std::vector<std::string> scripted;
  for (const std::string& file : mp::test::ZooFiles()) {
    if (file.find(".script.") != std::string::npos) scripted.push_back(file);
  }
  std::vector<std::string> at = mp::test::ZooFilesAt(scripted, {2, 3, 4}, processes, 2);
  // The sanitizer jobs (MP_TEST_ZOO) take one model per count, which gives
  // each count a kind of its own: the ranks' transport is the same for
  // every model, and 5 processes under ASan per model made the 4-process
  // case 72 s (BERT and MobileNetV3, which the replicas test runs over 4
  // processes too).
  if (!mp::test::ZooSubset().empty() && at.size() > 1) at.resize(1);
  const std::string n = std::to_string(processes);
  static const char* const kKinds[] = {"infer", "gpipe", "1f1b"};
  for (size_t index = 0; index < at.size(); ++index) {
    const std::string& file = at[index];
    const std::string kind = kKinds[(index + size_t(processes)) % 3];
    const bool training = kind != "infer";
    CAPTURE(file);
    CAPTURE(kind);
    const std::string flags = training ? "--schedule " + kind : "--mode infer";
    const std::string steps = training ? " --steps 2 --lr 0.01 --momentum 0.9" : "";
    const auto run =
        Mpexec(Plan("zoo", file, processes, flags) + " --launch-local " + n + steps + " --verify --json --timeout 60");
    INFO(run.out);
    if (training && file.rfind("inplace.", 0) == 0) {  // eager PyTorch cannot train it either (test_training)
      CHECK(run.status == 1);
      CHECK(run.out.find("modified by an inplace operation") != std::string::npos);
      CHECK(IsOneLine(run.out));
      continue;
    }
    REQUIRE(run.status == 0);
    const auto j = nlohmann::json::parse(run.out);
    CHECK(j["verify"] == true);
    CHECK(j["ranks"] == processes);
    REQUIRE(j["stages"].size() == size_t(processes));
    for (int s = 0; s < processes; ++s) CHECK(j["stage_ranks"][s] == s);
    if (!training) {
      CHECK(j["verify_detail"]["max_abs_diff"].get<double>() == 0);  // bit for bit
      CHECK(j["transport"] == "c10d gloo");
      continue;
    }
    CHECK(j["verify_detail"]["max_loss_relative_diff"].get<double>() <= 1e-5);
    CHECK(j["verify_detail"]["max_state_relative_diff"].get<double>() <= 1e-5);
    CHECK(j["schedule"] == kind);
    CHECK(j["losses"].size() == 2);
    CHECK(j["loss"].get<double>() > 0);
    for (const auto& stage : j["stages"]) CHECK(stage["busy_ms"].get<double>() > 0);
  }
}

// Starts `command` under bash in the background; its pid.
pid_t Start(const std::string& command, const std::string& out) {
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/bash", "bash", "-c", (command + " >" + out + " 2>&1").c_str(), nullptr);
    _exit(127);
  }
  return pid;
}

// The children of `pid`, from /proc.
std::vector<pid_t> ChildrenOf(pid_t pid) {
  std::vector<pid_t> children;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    char state;
    pid_t parent;
    rest >> state >> parent;
    if (parent == pid) children.push_back(std::stoi(name));
  }
  std::sort(children.begin(), children.end());
  return children;
}

// Waits for `pid` to have `n` children (the ranks), at most 60 s.
std::vector<pid_t> WaitForChildren(pid_t pid, size_t n) {
  for (int i = 0; i < 600; ++i) {
    auto children = ChildrenOf(pid);
    if (children.size() >= n) return children;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return {};
}

bool Alive(pid_t pid) { return kill(pid, 0) == 0 && std::filesystem::exists("/proc/" + std::to_string(pid)); }

struct Ended {
  int status = -1;
  double seconds = 0;
};

Ended WaitFor(pid_t pid) {
  const auto start = std::chrono::steady_clock::now();
  int status = 0;
  waitpid(pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
}

// A training run long enough to be interrupted: the MLP at batch 256 over
// 2 stages, about a second a step on 2 cores, 100 steps. A small model, so
// that the ranks meet within seconds even under a sanitizer (ResNet-50 took
// over 8 s to load there).
std::string LongRun(const std::string& test) {
  return std::string("exec ") + MP_MPEXEC_CPU + " " +
         MakePlan(test, "mlp.script.pt", 256, "--gpus 2 --stages 2 --microbatches 2") + " --steps 100";
}

}  // namespace

// A build whose LibTorch has no Gloo headers (pip's) runs no processes.
TEST_SUITE_BEGIN("over processes" * doctest::skip(!mp::ProcessGroupsAvailable()));

TEST_CASE("training and inference of a third of the zoo over 2 processes (the rest over 3 and 4) match one device") {
  RunZooOverProcesses(2);
}

TEST_CASE("training and inference of a third of the zoo over 3 processes (the rest over 2 and 4) match one device") {
  RunZooOverProcesses(3);
}

TEST_CASE("training and inference of a third of the zoo over 4 processes (the rest over 2 and 3) match one device") {
  RunZooOverProcesses(4);
}

TEST_CASE("a rank may own several stages: 4 stages over 2 processes, values relayed past a rank") {
  const auto run = Mpexec(Plan("blocks", "gpt.script.pt", 4, "--schedule 1f1b") +
                          " --launch-local 2 --steps 2 --lr 0.01 --verify --json --timeout 60");
  INFO(run.out);
  REQUIRE(run.status == 0);
  const auto j = nlohmann::json::parse(run.out);
  CHECK(j["verify"] == true);
  CHECK(j["stage_ranks"] == nlohmann::json::array({0, 0, 1, 1}));
  for (const auto& stage : j["stages"]) CHECK(stage["busy_ms"].get<double>() > 0);
}

TEST_CASE("replicas: 2 copies of a 2-stage pipeline over 4 processes train as one device does") {
  // MobileNetV3 has BatchNorm, whose statistics each replica takes over its
  // own half of the batch: its buffers differ from one device's (the note).
  // It stands in for ResNet-50 (the same paths, a sixteenth of the weights:
  // 4 processes loading ResNet-50 took most of this test's time).
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"mlp.script.pt", "zbv"}, {"gpt.script.pt", "zb-h1"}, {"mobilenet.script.pt", "1f1b"}};
  std::vector<std::string> files;
  for (const auto& c : cases) files.push_back(c.first);
  const std::vector<std::string> kept = mp::test::ZooKeep(files);
  for (const auto& run : cases) {
    const auto& file = run.first;
    const auto& schedule = run.second;
    if (std::find(kept.begin(), kept.end(), file) == kept.end()) continue;  // the sanitizers: MobileNetV3's
    CAPTURE(file);
    const std::string plan = ReplicaPlan("replicas", file, 2, "--schedule " + schedule);
    const std::string yaml = mp::ReadTextFile(plan);
    CHECK(yaml.find("\nreplicas: 2\n") != std::string::npos);
    CHECK(yaml.find("replica_devices: [0, 2]") != std::string::npos);
    CHECK(yaml.find("replica_devices: [1, 3]") != std::string::npos);
    const auto j =
        mp::test::VerifiedTraining(plan + " --launch-local 4 --steps 2 --lr 0.01 --momentum 0.9 --timeout 60");
    CHECK(j["replicas"] == 2);
    CHECK(j["ranks"] == 4);
    // Replica 0's ranks, a stage's device (zbv's V: 0, 1, 1, 0); replica 1
    // runs on ranks 2 and 3.
    const mp::Plan read = mp::ReadPlan(plan);
    std::vector<int> devices;
    for (const auto& stage : read.stages) devices.push_back(stage.device);
    CHECK(j["stage_ranks"] == nlohmann::json(devices));
    CHECK(devices.size() == (schedule == "zbv" ? 4u : 2u));
    CHECK(j["samples_per_s"].get<double>() > 0);
    REQUIRE(j["stages"].size() == devices.size());
    for (const auto& stage : j["stages"]) {
      CHECK(stage["busy_ms"].get<double>() > 0);
      CHECK(stage["allreduce_ms"].get<double>() > 0);  // measured, within the step
      CHECK(stage["allreduce_ms"].get<double>() < j["step_ms"].get<double>());
      CHECK(stage["predicted_allreduce_ms"].get<double>() > 0);
      // Each timed step's, of which allreduce_ms is the middle mean.
      const auto each = stage["allreduce_steps_ms"].get<std::vector<double>>();
      REQUIRE(each.size() == 2);
      CHECK(stage["allreduce_ms"].get<double>() == doctest::Approx(mp::MiddleMean(each)));
    }
    if (file.rfind("mobilenet", 0) == 0) CHECK(j["verify_detail"].contains("buffers_note"));
  }
  // One process per replica (pure data parallelism): the same state.
  const std::string replicas = ReplicaPlan("replicas", "gpt.script.pt", 1, "");
  const auto run = Mpexec(replicas + " --launch-local 2 --steps 2 --lr 0.01 --verify --json --timeout 60");
  INFO(run.out);
  REQUIRE(run.status == 0);
  const auto j = nlohmann::json::parse(run.out);
  CHECK(j["verify"] == true);
  CHECK(j["verify_detail"]["max_state_relative_diff"].get<double>() <= 1e-5);
  // Left to the scheduler by default; with MP_PIN_CPUS=1 each rank on its
  // own share of the cores, its Gloo threads too.
  const std::vector<int>& cores = mp::AllowedCpus();
  CHECK(j["process_cpus"] == mp::CpuList(cores));
  setenv("MP_PIN_CPUS", "1", 1);
  const auto bound = Mpexec(replicas + " --launch-local 2 --steps 1 --json --timeout 60");
  unsetenv("MP_PIN_CPUS");
  REQUIRE(bound.status == 0);
  const std::string first_share = cores.size() >= 2 ? mp::CpuList(mp::RankCpus(cores, 0, 2)) : mp::CpuList(cores);
  CHECK(nlohmann::json::parse(bound.out)["process_cpus"] == first_share);
}

TEST_CASE("over processes rank 0 alone samples the drift reference, before the steps and not between them") {
  // A measured profile of one thread a stage, which in one process samples
  // after every step too (test_mpexec). Over processes a sample between two
  // steps, pinned to each worker's cores in turn, ran on another rank's
  // cores as that rank began its next step.
  const std::string plan = TempPath("dist.drift.toy.plan.yaml");
  const auto made = Mpplan(ZooPath("toy.script.pt") + " --quiet --gpus 2 --replicas 2 --stages 1 --threads 1 "
                                                      "--warmup 0 --repeats 2 -o " + plan);
  INFO(made.out);
  REQUIRE(made.status == 0);
  const auto run = Mpexec(plan + " --launch-local 2 --steps 3 --json --timeout 60");
  INFO(run.out);
  REQUIRE(run.status == 0);
  const auto j = nlohmann::json::parse(run.out);
  CHECK(j["replicas"] == 2);
  REQUIRE(j.contains("drift"));
  CHECK(j["drift"]["samples"] == 5);
  CHECK(j["drift"]["factor"].get<double>() > 0);
}

TEST_CASE("replicas in inference: each runs its share and rank 0 joins them in order") {
  const std::string plan = ReplicaPlan("replicas_infer", "lstm.script.pt", 2, "--mode infer");
  const std::string four = TempPath("dist.replicas.four.pt"), two = TempPath("dist.replicas.two.pt");
  std::filesystem::remove(four);
  std::filesystem::remove(two);
  const auto run = Mpexec(plan + " --launch-local 4 --verify --output " + four);
  INFO(run.out);
  REQUIRE(run.status == 0);
  CHECK(run.out.find("outputs equal, bit for bit") != std::string::npos);
  CHECK(run.out.find("2 replicas: stage 0 on ranks 0, 2; stage 1 on ranks 1, 3") != std::string::npos);
  REQUIRE(Mpexec(plan + " --launch-local 2 --output " + two).status == 0);  // a replica in one process
  CHECK(mp::ReadTextFile(four) == mp::ReadTextFile(two));
  // Without a launcher mpexec starts the processes itself, and says so.
  const std::string alone = TempPath("dist.replicas.alone.pt");
  std::filesystem::remove(alone);
  const auto self = Mpexec(plan + " --output " + alone);
  INFO(self.out);
  REQUIRE(self.status == 0);
  CHECK(self.out.find("ranks       4 processes") != std::string::npos);
  CHECK(mp::ReadTextFile(four) == mp::ReadTextFile(alone));
}

TEST_CASE("the rank whose own error ended the run is named first, not the peer that lost it") {
  // 2 replicas of a model whose second output is a mean over the batch
  // (mpplan refuses that; the plan is edited): rank 0 cannot join the
  // replicas' means and fails, and rank 1, sending it its outputs, loses
  // the connection. Either may exit first; rank 0's error leads.
  const std::string one =
      MakePlan("rank_order", "fixtures/batch_mean.pt", 8, "--gpus 2 --mode infer --input 'float32[8,3]' --stages 1");
  std::string text = mp::ReadTextFile(one);
  const auto replace = [&](const std::string& from, const std::string& to) {
    const size_t at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), to);
  };
  replace("\nmicrobatches: 1\nmicrobatch_size: 8\n",
          "\nreplicas: 2\nreplica_link: {bandwidth_bytes_per_s: 1000000000, latency_ms: 0.1}\nmicrobatches: 1\n"
          "microbatch_size: 4\n");
  replace("    device: 0\n", "    device: 0\n    replica_devices: [0, 1]\n");
  const std::string two = TempPath("dist.batch_mean.replicas.plan.yaml");
  std::ofstream(two) << text;
  for (int turn = 0; turn < 3; ++turn) {
    const auto run = Mpexec(two + " --launch-local 2");
    INFO(run.out);
    CHECK(run.status == 1);
    CHECK(IsOneLine(run.out));
    CHECK(run.out.rfind("mpexec: rank 0 failed: output 0's tensor 1 (shape []): no dimension grows with the batch", 0) ==
          0);
  }
}

TEST_CASE("over processes, --output and --save write what one process writes") {
  const std::string plan = Plan("files", "lstm.script.pt", 3, "--mode infer");
  const std::string one = TempPath("dist.lstm.one.pt"), three = TempPath("dist.lstm.three.pt");
  std::filesystem::remove(one);
  std::filesystem::remove(three);
  REQUIRE(Mpexec(plan + " --output " + one).status == 0);
  const auto run = Mpexec(plan + " --launch-local 3 --output " + three);
  INFO(run.out);
  REQUIRE(run.status == 0);
  CHECK(run.out.find("ranks       3 processes") != std::string::npos);  // the report says how it ran
  CHECK(mp::ReadTextFile(one) == mp::ReadTextFile(three));

  const std::string train = Plan("files", "mlp.script.pt", 2, "");
  const std::string saved_one = TempPath("dist.mlp.one.pt"), saved_two = TempPath("dist.mlp.two.pt");
  std::filesystem::remove(saved_one);
  std::filesystem::remove(saved_two);
  REQUIRE(Mpexec(train + " --steps 2 --lr 0.01 --save " + saved_one).status == 0);
  REQUIRE(Mpexec(train + " --launch-local 2 --steps 2 --lr 0.01 --save " + saved_two).status == 0);
  // Python compares the two trained models' parameters.
  const auto compared = mp::test::RunTool(
      MP_PYTHON, "-c \"import torch; a = torch.jit.load('" + saved_one + "').state_dict(); b = torch.jit.load('" +
                     saved_two + "').state_dict(); print(len(a) > 0 and all(torch.equal(a[k], b[k]) for k in a))\"");
  INFO(compared.out);
  CHECK(compared.out == "True\n");
}

TEST_CASE("torchrun's environment: each process runs its rank's stages and rank 0 reports") {
  const std::string plan = Plan("env", "mlp.script.pt", 2, "--schedule 1f1b");
  const std::string out0 = TempPath("dist.env.rank0.out"), out1 = TempPath("dist.env.rank1.out");
  const std::string env = "MASTER_ADDR=127.0.0.1 MASTER_PORT=29731 WORLD_SIZE=2 ";
  const std::string args = std::string(" ") + MP_MPEXEC_CPU + " " + plan + " --steps 2 --verify --json --timeout 60";
  const pid_t rank1 = Start(env + "RANK=1" + args, out1);
  const pid_t rank0 = Start(env + "RANK=0" + args, out0);
  CHECK(WaitFor(rank0).status == 0);
  CHECK(WaitFor(rank1).status == 0);
  const std::string report = mp::ReadTextFile(out0);
  INFO(report);
  const auto j = nlohmann::json::parse(report);
  CHECK(j["verify"] == true);
  CHECK(j["ranks"] == 2);
  CHECK(mp::ReadTextFile(out1).empty());  // rank 1 reports through rank 0
}

TEST_CASE("a rank that is killed ends the run with one line naming it, well within the timeout") {
  const std::string out = TempPath("dist.killed.out");
  // Killed into the steps. Killed before the ranks have met (loading takes
  // longer under a sanitizer on a busy machine), the survivor would wait for
  // it until the launcher's grace runs out: then try again, waiting longer.
  bool in_steps = false;
  for (int wait_s = 4; wait_s <= 32 && !in_steps; wait_s *= 2) {
    const pid_t launcher = Start(LongRun("killed") + " --launch-local 2 --timeout 30", out);
    const auto ranks = WaitForChildren(launcher, 2);
    REQUIRE(ranks.size() == 2);
    std::this_thread::sleep_for(std::chrono::seconds(wait_s));
    kill(ranks[1], SIGKILL);
    const Ended ended = WaitFor(launcher);
    const std::string text = mp::ReadTextFile(out);
    INFO(text);
    CHECK(ended.status == 1);
    CHECK(IsOneLine(text));
    CHECK(text.rfind("mpexec: rank 1 died of signal 9", 0) == 0);
    for (pid_t rank : ranks) CHECK_FALSE(Alive(rank));
    if (text.find("never joined") != std::string::npos || text.find("then rank 0 died") != std::string::npos) {
      MESSAGE("killed before the ranks met, after " << wait_s << " s; again");
      continue;
    }
    in_steps = true;
    CHECK(ended.seconds < 30);  // the survivor sees the closed connection at once, not after --timeout (30 s)
    CHECK(text.find("then rank 0: ") != std::string::npos);  // rank 0 stopped on its own, and said why
    CHECK(text.find(" rank 1", text.find("then rank 0: ")) != std::string::npos);  // "sending to rank 1: ..."
  }
  CHECK(in_steps);
}

TEST_CASE("a rank that hangs is named by its peer after --timeout") {
  const std::string out = TempPath("dist.hung.out");
  const pid_t launcher = Start(LongRun("hung") + " --launch-local 2 --timeout 3", out);
  const auto ranks = WaitForChildren(launcher, 2);
  REQUIRE(ranks.size() == 2);
  // Into the steps: "receiving from rank 1: nothing for 3 s". Stopped
  // before the ranks have met (a slow start), it is "rank 1 of 2 never
  // joined within 3 s": named after --timeout either way.
  std::this_thread::sleep_for(std::chrono::seconds(6));
  kill(ranks[1], SIGSTOP);
  const Ended ended = WaitFor(launcher);
  const std::string text = mp::ReadTextFile(out);
  INFO(text);
  CHECK(ended.status == 1);
  CHECK(ended.seconds < 40);  // 3 s of silence, 3 s of grace, SIGTERM then SIGKILL after 3 s more
  CHECK(IsOneLine(text));
  CHECK(text.rfind("mpexec: rank 0 failed: ", 0) == 0);
  CHECK(text.find("rank 1") != std::string::npos);
  CHECK(text.find(" 3 s (--timeout)") != std::string::npos);  // "receiving from rank 1: nothing for 3 s (--timeout)"
  for (pid_t rank : ranks) CHECK_FALSE(Alive(rank));
}

TEST_CASE("a rank that never arrives is named after --timeout") {
  const auto run = mp::test::RunTool("MASTER_ADDR=127.0.0.1 MASTER_PORT=29733 WORLD_SIZE=3 RANK=0 " +
                                         std::string(MP_MPEXEC_CPU),
                                     Plan("missing", "mlp.script.pt", 3, "") + " --timeout 2");
  INFO(run.out);
  CHECK(run.status == 1);
  CHECK(run.out == "mpexec: rank 0: ranks 1, 2 of 3 never joined within 2 s (--timeout)\n");
  const auto alone = mp::test::RunTool("MASTER_ADDR=127.0.0.1 MASTER_PORT=29734 WORLD_SIZE=2 RANK=1 " +
                                           std::string(MP_MPEXEC_CPU),
                                       Plan("missing", "mlp.script.pt", 2, "") + " --timeout 2");
  INFO(alone.out);
  CHECK(alone.status == 1);
  CHECK(alone.out.rfind("mpexec: rank 1: rank 0 never opened the rendezvous at 127.0.0.1:29734", 0) == 0);
}

TEST_CASE("Ctrl-C on the launcher stops every rank") {
  const std::string out = TempPath("dist.interrupted.out");
  const pid_t launcher = Start(LongRun("interrupted") + " --launch-local 2", out);
  const auto ranks = WaitForChildren(launcher, 2);
  REQUIRE(ranks.size() == 2);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  kill(launcher, SIGINT);
  const Ended ended = WaitFor(launcher);
  const std::string text = mp::ReadTextFile(out);
  INFO(text);
  CHECK(ended.status == 130);
  CHECK(ended.seconds < 10);
  CHECK(text.find("mpexec: interrupted (Interrupt); stopped 2 ranks\n") != std::string::npos);
  for (pid_t rank : ranks) CHECK_FALSE(Alive(rank));
}

TEST_CASE("bad input over processes is still one line") {
  const std::string plan = Plan("bad", "mlp.script.pt", 2, "--schedule 1f1b");  // one stage per device
  const auto more = mp::test::RunTool("MASTER_ADDR=127.0.0.1 MASTER_PORT=29735 WORLD_SIZE=3 RANK=0 " +
                                          std::string(MP_MPEXEC_CPU), plan);
  CHECK(more.status == 1);
  CHECK(more.out == "mpexec: rank 0: WORLD_SIZE=3: the plan has 2 stages, so at most 2 ranks can run it\n");
  const auto same = Mpexec(plan + " --launch-local 2 --steps 0");
  CHECK(same.status == 1);
  CHECK(same.out == "mpexec: --steps must be at least 1, got 0\n");  // every rank said it: once
  const auto zero = Mpexec(plan + " --launch-local 0");
  CHECK(zero.status == 1);
  CHECK(zero.out == "mpexec: --launch-local must be at least 1, got 0\n");
  const auto rank = mp::test::RunTool("MASTER_ADDR=127.0.0.1 MASTER_PORT=29736 WORLD_SIZE=2 RANK=2 " +
                                          std::string(MP_MPEXEC_CPU), plan);
  CHECK(rank.status == 1);
  CHECK(rank.out == "mpexec: RANK=2: expected a whole number from 0 to 1\n");
}

TEST_CASE("a NaN loss over processes is reported as one process reports it") {
  const std::string plan = Plan("nan", "mlp.script.pt", 2, "");
  const auto one = Mpexec(plan + " --steps 2 --lr 1e30");
  const auto two = Mpexec(plan + " --steps 2 --lr 1e30 --launch-local 2");
  INFO(two.out);
  CHECK(one.status == 0);
  CHECK(two.status == 0);
  CHECK(two.out.find("loss        -nan") != std::string::npos);
  CHECK(two.out.find("loss        ") == two.out.find(one.out.substr(one.out.find("loss        "), 12)));
}

TEST_SUITE_END();
