// Every user mistake the hardening issue lists, one CTest test each: the
// command exits non-zero (1, or 2 for a flag CLI11 cannot parse), prints
// exactly one line on stderr that names the file, flag or plan key, within
// a time limit, and leaves every file in its folder byte-identical, with no
// new file beside them (no half-written plan, report, trace or model).
//
// docs/errors.md is checked against these tests: each case's row (id, what,
// command, exit status, message) must be in it, and it must have no other
// rows. After changing a message, regenerate the rows with
//   MP_ERRORS_DOC_UPDATE=1 build/tests/errors/test_errors
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "common/atomic_file.h"
#include "common/sha256.h"

namespace fs = std::filesystem;

namespace {

const std::string kDoc = std::string(MP_SOURCE_DIR) + "/docs/errors.md";
const std::string kTableEnd = "<!-- end of the table: rows come from tests/errors/test_errors.cpp -->";

// One bad input: the command as a user types it in a folder that holds the
// case's files (made by `setup`), and what the error must name.
struct BadInput {
  std::string id;    // the row's key in docs/errors.md
  std::string what;  // the mistake, in words
  std::string command;
  std::string names;  // stderr must contain this: the file, flag or key
  int status = 1;
  std::function<void(const fs::path& dir)> setup;
};

std::vector<std::string>& CaseIds() {
  static std::vector<std::string> ids;
  return ids;
}

struct Registered {
  explicit Registered(const char* id) { CaseIds().push_back(id); }
};

std::string ReadAll(const fs::path& path) { return mp::ReadTextFile(path.string()); }

void WriteAll(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  REQUIRE(out.good());
}

// Replaces the first `from` in the file; the case is void if it is not there.
void Edit(const fs::path& path, const std::string& from, const std::string& to) {
  std::string text = ReadAll(path);
  const size_t at = text.find(from);
  INFO("editing " << path << ": looking for '" << from << "'");
  REQUIRE(at != std::string::npos);
  text.replace(at, from.size(), to);
  WriteAll(path, text);
}

void CopyZoo(const std::string& file, const fs::path& to) {
  fs::copy_file(std::string(MP_MODELS_DIR) + "/" + file, to, fs::copy_options::overwrite_existing);
}

// Runs a command in `dir` with a time limit; returns the exit status.
int Run(const std::string& command, const fs::path& dir, const fs::path& out, const fs::path& err) {
  const std::string line = "cd '" + dir.string() + "' && timeout 120 " + command + " >'" + out.string() + "' 2>'" +
                           err.string() + "' </dev/null";
  const int status = std::system(line.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// toy.pt: the zoo's three-layer toy model, the usual case's only file.
void ToyModel(const fs::path& dir) { CopyZoo("toy.script.pt", dir / "toy.pt"); }

// toy.pt (three layers: net1, relu, net2; batch 20) and a plan for it with
// a fixed split, so the plan's node ranges do not depend on timings: mpplan
// made it once for this build (tests/errors/CMakeLists.txt).
void ToyPlan(const fs::path& dir, const std::string& mode = "train") {
  ToyModel(dir);
  const std::string plan = mode == "train" ? "toy.plan.yaml" : "toy.infer.yaml";
  fs::copy_file(fs::path(MP_TOY_PLANS) / plan, dir / plan, fs::copy_options::overwrite_existing);
}

// A fixture model (float32[8, 3] in) as model.pt and an inference plan
// for it on one device, model.plan.yaml, made here by mpplan.
void InferencePlan(const fs::path& dir, const std::string& fixture) {
  CopyZoo(fixture, dir / "model.pt");
  const std::string command = std::string(MP_MPPLAN) +
                              " model.pt --gpus 1 --mode infer --input 'float32[8,3]' --repeats 1 --warmup 0 "
                              "--quiet -o model.plan.yaml";
  REQUIRE(Run(command, dir, dir.parent_path() / "plan.out", dir.parent_path() / "plan.err") == 0);
}

// toy.pt and two profiles of it, made once for this build
// (tests/errors/CMakeLists.txt): toy.a100.yaml analytic for
// --device-profile a100-80gb, toy.cpu.yaml measured on this machine's CPU.
void ToyProfiles(const fs::path& dir) {
  ToyModel(dir);
  for (const char* profile : {"toy.a100.yaml", "toy.cpu.yaml"}) {
    fs::copy_file(fs::path(MP_TOY_PLANS) / profile, dir / profile, fs::copy_options::overwrite_existing);
  }
}

// toy.pt and toy.r2.yaml: 2 replicas of the same 2-stage split (4 devices,
// 10 samples each).
void ToyReplicaPlan(const fs::path& dir) {
  ToyModel(dir);
  fs::copy_file(fs::path(MP_TOY_PLANS) / "toy.r2.yaml", dir / "toy.r2.yaml", fs::copy_options::overwrite_existing);
}

// Every file under `dir` and its SHA-256.
std::map<std::string, std::string> Snapshot(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    const std::string name = fs::relative(entry.path(), dir).string();
    files[name] = entry.is_regular_file() ? mp::Sha256Hex(ReadAll(entry.path())) : "(not a file)";
  }
  return files;
}

std::string Cell(std::string text) {
  // Hashes and fingerprints differ between exports of the zoo: not part of the row.
  text = std::regex_replace(text, std::regex("[0-9a-f]{12,}(\\.\\.\\.)?"), "…");
  std::string escaped;
  for (char c : text) escaped += c == '|' ? std::string("\\|") : std::string(1, c);
  return escaped;
}

std::string Row(const BadInput& c, const std::string& message) {
  return "| `" + c.id + "` | " + c.what + " | `" + Cell(c.command) + "` | " + std::to_string(c.status) + " | `" +
         Cell(message) + "` |";
}

std::vector<std::string> DocLines() {
  std::vector<std::string> lines;
  std::istringstream in(ReadAll(kDoc));
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A message quotes the line of PyTorch's own Python that raised (`F.linear`,
// linear.py:114); that line moves between PyTorch versions, the doc is
// generated with one.
std::string WithoutPythonLines(const std::string& row) {
  static const std::regex line(R"(\.py:[0-9]+)");
  return std::regex_replace(row, line, ".py:N");
}

bool IsRowOf(const std::string& line, const std::string& id) { return line.rfind("| `" + id + "` |", 0) == 0; }

// MP_ERRORS_DOC_UPDATE=1: replace the case's row, or add it at the end.
void UpdateDoc(const BadInput& c, const std::string& row) {
  std::vector<std::string> lines = DocLines();
  bool done = false;
  for (auto& line : lines) {
    if (IsRowOf(line, c.id)) line = row, done = true;
  }
  for (size_t i = 0; i < lines.size() && !done; ++i) {
    if (lines[i] == kTableEnd) lines.insert(lines.begin() + i, row), done = true;
  }
  REQUIRE(done);
  std::ofstream out(kDoc);
  for (const auto& line : lines) out << line << "\n";
}

void Check(const BadInput& c) {
  const fs::path base = fs::path(MP_TEST_TMP) / "errors";
  const fs::path dir = base / c.id;
  fs::remove_all(dir);
  fs::create_directories(dir);
  if (c.setup) c.setup(dir);
  const auto before = Snapshot(dir);

  const std::string tool = c.command.substr(0, c.command.find(' '));
  REQUIRE((tool == "mpplan" || tool == "mpexec"));
  const std::string binary = tool == "mpplan" ? MP_MPPLAN : MP_MPEXEC;
  const fs::path out = base / (c.id + ".stdout"), err = base / (c.id + ".stderr");
  const int status = Run(binary + c.command.substr(tool.size()), dir, out, err);
  const std::string message = ReadAll(err);
  INFO("command: " << c.command);
  INFO("stderr: " << message);
  INFO("stdout: " << ReadAll(out));

  CHECK_MESSAGE(status != 124, "the command did not finish within 120 s");
  CHECK(status == c.status);
  REQUIRE(!message.empty());
  CHECK(message.back() == '\n');
  CHECK(std::count(message.begin(), message.end(), '\n') == 1);  // one line
  CHECK(message.rfind(tool + ": ", 0) == 0);
  CHECK(message.find(c.names) != std::string::npos);
  CHECK(message.find("terminate called") == std::string::npos);
  CHECK(Snapshot(dir) == before);  // inputs untouched, nothing written

  const std::string row = Row(c, message.substr(0, message.find('\n')));
  if (std::getenv("MP_ERRORS_DOC_UPDATE")) {
    UpdateDoc(c, row);
    return;
  }
  std::string documented = "(no row)";
  for (const auto& line : DocLines()) {
    if (IsRowOf(line, c.id)) documented = line;
  }
  INFO("docs/errors.md has: " << documented);
  INFO("the test makes:     " << row);
  INFO("regenerate with: MP_ERRORS_DOC_UPDATE=1 " << MP_SOURCE_DIR << "/build/tests/errors/test_errors");
  CHECK(WithoutPythonLines(documented) == WithoutPythonLines(row));
}

}  // namespace

#define MP_CAT_(a, b) a##b
#define MP_CAT(a, b) MP_CAT_(a, b)
// ERROR_CASE("id", "what") { c.command = ...; }: one bad input, registered
// as its own test and as a row docs/errors.md must have.
#define ERROR_CASE(id_, what_) ERROR_CASE_(id_, what_, MP_CAT(ErrorCase, __LINE__))
#define ERROR_CASE_(id_, what_, fn)                    \
  static void fn(BadInput& c);                         \
  static const Registered MP_CAT(fn, Registered)(id_); \
  TEST_CASE("bad input: " id_) {                       \
    BadInput c;                                        \
    c.id = id_;                                        \
    c.what = what_;                                    \
    fn(c);                                             \
    Check(c);                                          \
  }                                                    \
  static void fn(BadInput& c)

// ---- the model file -------------------------------------------------------

ERROR_CASE("model-missing", "model file missing") {
  c.command = "mpplan nope.pt --gpus 2";
  c.names = "nope.pt";
}

ERROR_CASE("model-unreadable", "model path that cannot be read as a file (a directory)") {
  c.command = "mpplan models --gpus 2";
  c.names = "models";
  c.setup = [](const fs::path& dir) { fs::create_directory(dir / "models"); };
}

ERROR_CASE("model-empty", "model file empty") {
  c.command = "mpplan empty.pt --gpus 2";
  c.names = "empty.pt";
  c.setup = [](const fs::path& dir) { WriteAll(dir / "empty.pt", ""); };
}

ERROR_CASE("model-truncated", "model file truncated (a download cut short)") {
  c.command = "mpplan part.pt --gpus 2";
  c.names = "part.pt";
  c.setup = [](const fs::path& dir) {
    const std::string bytes = ReadAll(std::string(MP_MODELS_DIR) + "/toy.script.pt");
    WriteAll(dir / "part.pt", bytes.substr(0, bytes.size() / 2));
  };
}

ERROR_CASE("model-not-zip", "model file that is not a zip archive") {
  c.command = "mpplan model.pt --gpus 2";
  c.names = "model.pt";
  c.setup = [](const fs::path& dir) { WriteAll(dir / "model.pt", "def forward(self, x):\n    return x\n"); };
}

ERROR_CASE("model-not-torchscript", "a zip that is not TorchScript (torch.save of a state dict)") {
  c.command = "mpplan weights.pt --gpus 2";
  c.names = "weights.pt";
  c.setup = [](const fs::path& dir) { CopyZoo("fixtures/toy_state_dict.pt", dir / "weights.pt"); };
}

ERROR_CASE("model-no-forward", "TorchScript with no forward method") {
  c.command = "mpplan model.pt --gpus 2";
  c.names = "no forward";
  c.setup = [](const fs::path& dir) { CopyZoo("fixtures/no_forward.pt", dir / "model.pt"); };  // def run(self, x)
}

ERROR_CASE("model-context-manager", "forward uses a context manager of the user's own") {
  c.command = "mpplan model.pt --gpus 2 --input 'float32[4,4]'";
  c.names = "Timer as a context manager";
  c.setup = [](const fs::path& dir) {
    CopyZoo("fixtures/user_context.pt", dir / "model.pt");  // with Timer("layer"): y = self.layer(x)
  };
}

ERROR_CASE("model-object-state", "forward assigns a field of a TorchScript object") {
  c.command = "mpplan model.pt --gpus 2 --input 'float32[4,4]'";
  c.names = "attribute 'n' of a";
  c.setup = [](const fs::path& dir) {
    CopyZoo("fixtures/object_state.pt", dir / "model.pt");  // counter = Counter(); counter.n = counter.n + 1
  };
}

ERROR_CASE("model-autocast", "forward turns autocast on") {
  c.command = "mpplan model.pt --gpus 2 --input 'float32[4,4]'";
  c.names = "autocast";
  c.setup = [](const fs::path& dir) {
    CopyZoo("fixtures/autocast_on.pt", dir / "model.pt");  // with torch.cuda.amp.autocast(): y = x * 2
  };
}

ERROR_CASE("model-default-given", "--input gives a float argument that has a default") {
  c.command = "mpplan model.pt --gpus 2 --input 'float32[4,4]' --input 'float32[1]'";
  c.names = "'scale' is float";
  c.setup = [](const fs::path& dir) {
    CopyZoo("fixtures/float_default.pt", dir / "model.pt");  // def forward(self, x: Tensor, scale: float = 2.0)
  };
}

ERROR_CASE("model-dict-input", "forward takes a dict") {
  c.command = "mpplan model.pt --gpus 2 --input 'float32[4,4]'";
  c.names = "Dict[str, Tensor]";
  c.setup = [](const fs::path& dir) {
    CopyZoo("fixtures/dict_input.pt", dir / "model.pt");  // def forward(self, x: Dict[str, Tensor])
  };
}

ERROR_CASE("model-string-input", "forward takes a string") {
  c.command = "mpplan model.pt --gpus 2 --input 'float32[4,4]' --input 'float32[4]'";
  c.names = "'s' is str";
  c.setup = [](const fs::path& dir) {
    CopyZoo("fixtures/string_input.pt", dir / "model.pt");  // def forward(self, x: Tensor, s: str)
  };
}

ERROR_CASE("model-dict-output", "forward returns a dict of int keys") {
  c.command = "mpplan model.pt --gpus 2 --input 'float32[4,4]'";
  c.names = "returns Dict[int, Tensor]";
  c.setup = [](const fs::path& dir) {
    CopyZoo("fixtures/dict_output.pt", dir / "model.pt");  // def forward(self, x: Tensor) -> Dict[int, Tensor]
  };
}

ERROR_CASE("model-string-output", "forward returns a string") {
  c.command = "mpplan model.pt --gpus 2 --input 'float32[4,4]'";
  c.names = "returns str";
  c.setup = [](const fs::path& dir) {
    CopyZoo("fixtures/string_output.pt", dir / "model.pt");  // def forward(self, x: Tensor) -> str
  };
}

ERROR_CASE("model-none-output", "forward returns only None") {
  c.command = "mpplan model.pt --gpus 2 --input 'float32[4,4]'";
  c.names = "returns Tuple[NoneType, NoneType]";
  c.setup = [](const fs::path& dir) {
    CopyZoo("fixtures/none_output.pt", dir / "model.pt");  // def forward(self, x: Tensor): return (None, None)
  };
}

ERROR_CASE("model-shared-state-replicas", "replicas of a model whose forward updates a buffer by hand") {
  c.command = "mpplan model.pt --gpus 2 --replicas 2";
  c.names = "--replicas 2";
  c.setup = [](const fs::path& dir) {
    CopyZoo("heldout/centred.script.pt", dir / "model.pt");  // mean.mul_(0.9).add_(...), read before and after
  };
}

// ---- mpplan's flags --------------------------------------------------------

ERROR_CASE("input-syntax", "`--input` that is not dtype[dims]") {
  c.command = "mpplan toy.pt --gpus 2 --input 'float32[20,'";
  c.names = "--input 'float32[20,'";
  c.setup = ToyModel;
}

ERROR_CASE("input-dtype-unknown", "`--input` with a dtype that does not exist") {
  c.command = "mpplan toy.pt --gpus 2 --input 'float33[20,10]'";
  c.names = "float33";
  c.setup = ToyModel;
}

ERROR_CASE("input-count", "`--input` given fewer times than the model has inputs") {
  c.command = "mpplan model.pt --gpus 2 --input 'float32[4,4]'";
  c.names = "takes 2 inputs";
  c.setup = [](const fs::path& dir) {
    CopyZoo("fixtures/two_inputs.pt", dir / "model.pt");  // def forward(self, x: Tensor, y: Tensor)
  };
}

ERROR_CASE("input-name-colon", "`--input` naming its input with ':' instead of '='") {
  c.command = "mpplan toy.pt --gpus 2 --input 'x:float32[20,10]'";
  c.names = "(x=float32[20,10])";
  c.setup = ToyModel;
}

ERROR_CASE("input-name-unknown", "`--input NAME=...` whose name is not one of forward's inputs") {
  c.command = "mpplan toy.pt --gpus 2 --input 'y=float32[20,10]'";
  c.names = "'y' is not one of forward's inputs (x)";
  c.setup = ToyModel;
}

ERROR_CASE("input-name-missing", "named `--input` flags that leave out an input without a default") {
  c.command = "mpplan model.pt --gpus 2 --input 'x=float32[4,4]'";
  c.names = "'y' has no default";
  c.setup = [](const fs::path& dir) {
    CopyZoo("fixtures/two_inputs.pt", dir / "model.pt");  // def forward(self, x: Tensor, y: Tensor)
  };
}

ERROR_CASE("input-name-tuple-part", "named `--input` flags that give part of a tuple argument") {
  c.command = "mpplan model.pt --gpus 2 --input 'input=int64[35,20]' --input 'hidden[0]=float32[2,20,200]'";
  c.names = "'hidden' is a tuple of 2 tensors: give all of hidden[0] to hidden[1] or none";
  c.setup = [](const fs::path& dir) {
    CopyZoo("heldout/word_lm.script.pt", dir / "model.pt");  // forward(self, input, hidden: Tuple[Tensor, Tensor])
  };
}

ERROR_CASE("input-shape-rejected", "`--input` shape the model rejects (names the node)") {
  c.command = "mpplan toy.pt --gpus 2 --input 'float32[20,7]'";
  c.names = "node 0 (aten::linear in layer net1)";
  c.setup = ToyModel;
}

ERROR_CASE("input-dtype-rejected", "`--input` dtype the model rejects (names the node)") {
  c.command = "mpplan toy.pt --gpus 2 --input 'int64[20,10]'";
  c.names = "node 0 (aten::linear in layer net1)";
  c.setup = ToyModel;
}

ERROR_CASE("profile-size-fails", "a micro-batch size the model cannot run (like BatchNorm training on one sample; here a model that pairs samples)") {
  c.command = "mpplan model.pt --gpus 2 --input 'float32[4,3]' --microbatch-sizes 1,4";
  c.names = "micro-batch size 1";
  c.setup = [](const fs::path& dir) {
    CopyZoo("fixtures/sample_pairs.pt", dir / "model.pt");  // x.reshape(x.size(0) // 2, 2, 3).sum(1), twice
  };
}

ERROR_CASE("profile-every-size-fails", "micro-batch sizes the model runs at none of (no hint to choose others)") {
  c.command = "mpplan model.pt --gpus 2 --input 'float32[4,3]' --microbatch-sizes 1,3";
  c.names = "(and at size 3)";
  c.setup = [](const fs::path& dir) { CopyZoo("fixtures/sample_pairs.pt", dir / "model.pt"); };
}

ERROR_CASE("replicas-too-many", "`--replicas` above `--gpus`") {
  c.command = "mpplan toy.pt --gpus 2 --replicas 3";
  c.names = "--replicas 3";
  c.setup = ToyModel;
}

ERROR_CASE("processes-device-profile", "`--processes` with a device profile") {
  c.command = "mpplan toy.pt --gpus 2 --processes --device-profile a100-80gb";
  c.names = "--processes";
  c.setup = ToyModel;
}

ERROR_CASE("recompute-zero-bubble", "`--recompute always` with a zero-bubble schedule") {
  c.command = "mpplan toy.pt --gpus 2 --recompute always --schedule zb-h1";
  c.names = "--recompute always";
  c.setup = ToyModel;
}

ERROR_CASE("recompute-inference", "`--recompute always` in inference") {
  c.command = "mpplan toy.pt --gpus 2 --mode infer --recompute always";
  c.names = "--recompute always";
  c.setup = ToyModel;
}

ERROR_CASE("previous-missing", "`--previous` naming no file") {
  c.command = "mpplan toy.pt --gpus 2 --previous old.plan.yaml -o new.plan.yaml";
  c.names = "--previous";
  c.setup = ToyModel;
}

ERROR_CASE("previous-other-batch", "`--previous` naming a plan made for another batch") {
  c.command = "mpplan toy.pt --gpus 2 --batch 10 --previous toy.plan.yaml -o new.plan.yaml";
  c.names = "--previous toy.plan.yaml";
  c.setup = [](const fs::path& dir) { ToyPlan(dir); };
}

ERROR_CASE("replicas-stages", "`--stages` above `--gpus / --replicas`") {
  c.command = "mpplan toy.pt --gpus 4 --replicas 2 --stages 3";
  c.names = "--stages 3";
  c.setup = ToyModel;
}

ERROR_CASE("replicas-batch", "a batch that `--replicas` does not divide") {
  c.command = "mpplan toy.pt --gpus 3 --replicas 3";
  c.names = "batch 20";
  c.setup = ToyModel;
}

ERROR_CASE("gpus-zero", "`--gpus 0`") {
  c.command = "mpplan toy.pt --gpus 0";
  c.names = "--gpus";
  c.setup = ToyModel;
}

ERROR_CASE("gpus-negative", "`--gpus` negative") {
  c.command = "mpplan toy.pt --gpus -2";
  c.names = "--gpus";
  c.setup = ToyModel;
}

ERROR_CASE("gpus-not-a-number", "`--gpus` not a number") {
  c.command = "mpplan toy.pt --gpus two";
  c.names = "--gpus";
  c.status = 2;
  c.setup = ToyModel;
}

ERROR_CASE("flag-twice", "a flag given twice (`--gpus 2 ... --gpus 4`)") {
  c.command = "mpplan toy.pt --gpus 2 --stages 1 --gpus 4";
  c.names = "--gpus given 2 times";
  c.status = 2;
  c.setup = ToyModel;
}

ERROR_CASE("flag-unknown", "a flag mpplan does not have") {
  c.command = "mpplan toy.pt --gpu 2";
  c.names = "--gpu";
  c.status = 2;
  c.setup = ToyModel;
}

ERROR_CASE("stages-above-gpus", "`--stages` above `--gpus`") {
  c.command = "mpplan toy.pt --gpus 2 --stages 3";
  c.names = "--stages 3";
  c.setup = ToyModel;
}

ERROR_CASE("stages-above-nodes", "`--stages` above the model's node count") {
  c.command = "mpplan toy.pt --gpus 8 --stages 5 --repeats 1 --quiet";
  c.names = "5 stages";
  c.setup = ToyModel;
}

ERROR_CASE("chunks-without-interleaved", "`--chunks` with a schedule other than interleaved-1f1b") {
  c.command = "mpplan toy.pt --gpus 2 --schedule zbv --chunks 3";
  c.names = "--chunks";
  c.setup = ToyModel;
}

ERROR_CASE("chunks-inference", "`--chunks` for inference, which runs one stage a device") {
  c.command = "mpplan toy.pt --gpus 2 --mode infer --chunks 3";
  c.names = "--chunks: --mode infer";
  c.setup = ToyModel;
}

ERROR_CASE("microbatches-model-fails", "`--microbatches` of a size the model fails at (BatchNorm1d at one sample)") {
  c.command = "mpplan model.pt --gpus 2 --microbatches 8 --device-profile a100-80gb";
  c.names = "--microbatches 8: a micro-batch of 1 sample";
  c.setup = [](const fs::path& dir) { CopyZoo("heldout/simclr.script.pt", dir / "model.pt"); };
}

ERROR_CASE("train-needs-no-grad", "training a model that PyTorch runs only without autograd (out= into its buffers)") {
  c.command = "mpplan model.pt --gpus 2 --device-profile a100-80gb";
  c.names = "it runs without autograd, so it can be planned for inference (--mode infer), not trained";
  c.setup = [](const fs::path& dir) { CopyZoo("heldout/sn_discriminator.trace_train.pt", dir / "model.pt"); };
}

ERROR_CASE("zbv-one-device", "`--schedule zbv` on one device") {
  c.command = "mpplan toy.pt --gpus 1 --stages 1 --microbatches 2 --schedule zbv --repeats 1 --quiet";
  c.names = "zbv needs at least 2 devices";
  c.setup = ToyModel;
}

ERROR_CASE("zbv-one-gpu", "`--schedule zbv` with `--gpus 1`: the flag that leaves one device is named") {
  c.command = "mpplan toy.pt --gpus 1 --schedule zbv";
  c.names = "zbv needs at least 2 devices a pipeline (2 stages on each); --gpus 1 leaves 1";
  c.setup = ToyModel;
}

ERROR_CASE("interleaved-shared-state", "`--schedule interleaved-1f1b` for a model that runs on one stage") {
  c.command = "mpplan model.pt --gpus 2 --schedule interleaved-1f1b --device-profile a100-80gb";
  c.names = "--schedule interleaved-1f1b: forward updates 'mean' in place";
  c.setup = [](const fs::path& dir) { CopyZoo("heldout/centred.script.pt", dir / "model.pt"); };
}

ERROR_CASE("memory-too-small", "`--memory` too small (gives the minimum that fits)") {
  c.command = "mpplan toy.pt --gpus 2 --stages 2 --memory 1KiB --repeats 1 --quiet";
  c.names = "the smallest limit that fits is";
  c.setup = ToyModel;
}

ERROR_CASE("memory-syntax", "`--memory` that is not a size") {
  c.command = "mpplan toy.pt --gpus 2 --memory 12XB";
  c.names = "--memory";
  c.setup = ToyModel;
}

ERROR_CASE("device-profile-unknown", "unknown device profile") {
  c.command = "mpplan toy.pt --gpus 2 --device-profile z100";
  c.names = "z100";
  c.setup = ToyModel;
}

ERROR_CASE("plan-output-unwritable", "plan output in a folder that does not exist") {
  c.command = "mpplan toy.pt --gpus 2 -o /nonexistent/toy.plan.yaml";
  c.names = "/nonexistent";
  c.setup = ToyModel;
}

ERROR_CASE("plan-output-is-model", "plan output that would overwrite the model") {
  c.command = "mpplan toy.pt --gpus 2 -o toy.pt";
  c.names = "toy.pt";
  c.setup = ToyModel;
}

ERROR_CASE("report-unwritable", "report in a folder that does not exist (and no plan is written)") {
  c.command = "mpplan toy.pt --gpus 2 --report /nonexistent/report.md";
  c.names = "/nonexistent";
  c.setup = ToyModel;
}

ERROR_CASE("profile-output-is-model", "`--profile-out` that would overwrite the model") {
  c.command = "mpplan toy.pt --gpus 2 --profile-out toy.pt";
  c.names = "toy.pt";
  c.setup = ToyModel;
}

ERROR_CASE("profile-analytic-for-cpu", "`--profile-in` an A100's profile, for this machine's CPU workers") {
  c.command = "mpplan toy.pt --gpus 2 --profile-in toy.a100.yaml";
  c.names = "--device-profile a100-80gb";
  c.setup = ToyProfiles;
}

ERROR_CASE("profile-other-device-profile", "`--profile-in` an A100's profile, for another `--device-profile`") {
  c.command = "mpplan toy.pt --gpus 2 --profile-in toy.a100.yaml --device-profile h100-sxm";
  c.names = "H100-SXM";
  c.setup = ToyProfiles;
}

ERROR_CASE("optimizer-inference", "`--optimizer` with `--mode infer`, which keeps no optimizer state") {
  c.command = "mpplan toy.pt --gpus 2 --mode infer --optimizer adam";
  c.names = "--optimizer adam";
  c.setup = ToyModel;
}

ERROR_CASE("calibrate-without-device-profile", "`--calibrate` without a device profile to fit") {
  c.command = "mpplan toy.pt --gpus 2 --calibrate";
  c.names = "--calibrate";
  c.setup = ToyModel;
}

ERROR_CASE("calibrate-profile-in", "`--calibrate` with `--profile-in`, whose times are read, not measured") {
  c.command = "mpplan toy.pt --gpus 2 --device-profile generic-cpu --calibrate --profile-in toy.cpu.yaml";
  c.names = "--profile-in";
  c.setup = ToyProfiles;
}

ERROR_CASE("profile-in-other-sizes", "`--microbatch-sizes` other than those of the `--profile-in` file") {
  c.command = "mpplan toy.pt --gpus 2 --profile-in toy.cpu.yaml --microbatch-sizes 2,20";
  c.names = "--microbatch-sizes 2,20";
  c.setup = ToyProfiles;
}

ERROR_CASE("profile-measured-for-device-profile", "`--profile-in` a profile measured here, for a `--device-profile`") {
  c.command = "mpplan toy.pt --gpus 2 --profile-in toy.cpu.yaml --device-profile a100-80gb";
  c.names = "--device-profile";
  c.setup = ToyProfiles;
}

// ---- the plan file ---------------------------------------------------------

ERROR_CASE("plan-missing", "plan file missing") {
  c.command = "mpexec nope.plan.yaml";
  c.names = "nope.plan.yaml";
}

ERROR_CASE("plan-is-model", "plan that is not YAML (the model given instead)") {
  c.command = "mpexec toy.pt";
  c.names = "toy.pt";
  c.setup = ToyModel;
}

ERROR_CASE("plan-not-a-map", "plan that is YAML but not a map of keys") {
  c.command = "mpexec notes.yaml";
  c.names = "top level";
  c.setup = [](const fs::path& dir) { WriteAll(dir / "notes.yaml", "run the toy model on two workers\n"); };
}

ERROR_CASE("plan-yaml-syntax", "plan with a YAML syntax error") {
  c.command = "mpexec toy.plan.yaml";
  c.names = "line";
  c.setup = [](const fs::path& dir) {
    ToyPlan(dir);
    Edit(dir / "toy.plan.yaml", "layers: [net1, relu]", "layers: [net1, relu");
  };
}

ERROR_CASE("plan-format-version", "plan with an unknown format version") {
  c.command = "mpexec toy.plan.yaml";
  c.names = "format";
  c.setup = [](const fs::path& dir) {
    ToyPlan(dir);
    Edit(dir / "toy.plan.yaml", "format: mpplan/v2", "format: mpplan/v9");
  };
}

ERROR_CASE("plan-missing-key", "plan with a key missing") {
  c.command = "mpexec toy.plan.yaml";
  c.names = "'batch'";
  c.setup = [](const fs::path& dir) {
    ToyPlan(dir);
    Edit(dir / "toy.plan.yaml", "\nbatch: 20\n", "\n");
  };
}

ERROR_CASE("plan-unknown-key", "plan with an unknown key (a typo)") {
  c.command = "mpexec toy.plan.yaml";
  c.names = "batchsize";
  c.setup = [](const fs::path& dir) {
    ToyPlan(dir);
    Edit(dir / "toy.plan.yaml", "\nbatch: 20\n", "\nbatch: 20\nbatchsize: 10\n");
  };
}

ERROR_CASE("plan-overlapping-nodes", "plan with a node in two stages") {
  c.command = "mpexec toy.plan.yaml";
  c.names = "stages[1].nodes[0]";
  c.setup = [](const fs::path& dir) {
    ToyPlan(dir);
    Edit(dir / "toy.plan.yaml", "nodes: [[2, 2]]", "nodes: [[1, 2]]");
  };
}

ERROR_CASE("plan-missing-nodes", "plan with a node in no stage") {
  c.command = "mpexec toy.plan.yaml";
  c.names = "node 1";
  c.setup = [](const fs::path& dir) {
    ToyPlan(dir);
    Edit(dir / "toy.plan.yaml", "nodes: [[0, 1]]", "nodes: [[0, 0]]");
  };
}

ERROR_CASE("plan-later-stage", "plan with a stage reading from a later stage") {
  c.command = "mpexec toy.plan.yaml";
  c.names = "stages[0].nodes";
  c.setup = [](const fs::path& dir) {
    ToyPlan(dir);
    Edit(dir / "toy.plan.yaml", "nodes: [[0, 1]]", "nodes: [[X]]");
    Edit(dir / "toy.plan.yaml", "nodes: [[2, 2]]", "nodes: [[0, 1]]");
    Edit(dir / "toy.plan.yaml", "nodes: [[X]]", "nodes: [[2, 2]]");
  };
}

ERROR_CASE("plan-device-out-of-range", "plan with a stage on a device it does not list") {
  c.command = "mpexec toy.plan.yaml";
  c.names = "stages[1].device";
  c.setup = [](const fs::path& dir) {
    ToyPlan(dir);
    Edit(dir / "toy.plan.yaml", "    device: 1\n", "    device: 7\n");
  };
}

ERROR_CASE("plan-zero-microbatches", "plan with zero micro-batches") {
  c.command = "mpexec toy.plan.yaml";
  c.names = "microbatches";
  c.setup = [](const fs::path& dir) {
    ToyPlan(dir);
    Edit(dir / "toy.plan.yaml", "\nmicrobatches: 2\n", "\nmicrobatches: 0\n");
  };
}

ERROR_CASE("plan-microbatches-above-batch", "plan with more micro-batches than samples") {
  c.command = "mpexec toy.plan.yaml";
  c.names = "microbatches";
  c.setup = [](const fs::path& dir) {
    ToyPlan(dir);
    Edit(dir / "toy.plan.yaml", "\nmicrobatches: 2\n", "\nmicrobatches: 40\n");
  };
}

ERROR_CASE("plan-microbatch-above-batch", "plan with a micro-batch larger than the batch") {
  c.command = "mpexec toy.plan.yaml";
  c.names = "microbatch_size";
  c.setup = [](const fs::path& dir) {
    ToyPlan(dir);
    Edit(dir / "toy.plan.yaml", "\nmicrobatch_size: 10\n", "\nmicrobatch_size: 40\n");
  };
}

ERROR_CASE("plan-model-missing", "plan whose model file is gone") {
  c.command = "mpexec toy.plan.yaml";
  c.names = "model.path";
  c.setup = [](const fs::path& dir) {
    ToyPlan(dir);
    fs::remove(dir / "toy.pt");
  };
}

ERROR_CASE("model-changed-sha256", "model file changed since planning (sha256)") {
  c.command = "mpexec toy.plan.yaml";
  c.names = "model.sha256";
  c.setup = [](const fs::path& dir) {
    ToyPlan(dir);
    CopyZoo("mlp.script.pt", dir / "toy.pt");
  };
}

ERROR_CASE("model-changed-graph", "model graph changed since planning (fingerprint)") {
  c.command = "mpexec toy.plan.yaml";
  c.names = "model.graph_fingerprint";
  c.setup = [](const fs::path& dir) {
    ToyPlan(dir);
    Edit(dir / "toy.plan.yaml", "graph_fingerprint: ", "graph_fingerprint: 0");
  };
}

ERROR_CASE("exec-model-other-graph", "`--model` whose canonical graph is not the plan's") {
  c.command = "mpexec toy.plan.yaml --model mlp.pt";
  c.names = "--model mlp.pt";
  c.setup = [](const fs::path& dir) {
    ToyPlan(dir);
    CopyZoo("mlp.script.pt", dir / "mlp.pt");
  };
}

// ---- mpexec's flags and outputs -------------------------------------------

ERROR_CASE("exec-other-devices", "plan made for devices that are not here, without `--device cpu`") {
  c.command = "mpexec toy.a100.yaml";
  c.names = "--device cpu";
  c.setup = [](const fs::path& dir) {
    ToyModel(dir);
    const std::string command = std::string(MP_MPPLAN) + " toy.pt --gpus 2 --device-profile a100-80gb --quiet -o toy.a100.yaml";
    REQUIRE(Run(command, dir, dir.parent_path() / "plan.out", dir.parent_path() / "plan.err") == 0);
  };
}

ERROR_CASE("exec-output-is-plan", "inference output that would overwrite the plan") {
  c.command = "mpexec toy.infer.yaml --output toy.infer.yaml";
  c.names = "toy.infer.yaml";
  c.setup = [](const fs::path& dir) { ToyPlan(dir, "infer"); };
}

ERROR_CASE("exec-save-is-model", "trained model output that would overwrite the model") {
  c.command = "mpexec toy.plan.yaml --save toy.pt";
  c.names = "toy.pt";
  c.setup = [](const fs::path& dir) { ToyPlan(dir); };
}

ERROR_CASE("exec-optimizer-flag", "a flag the optimizer that runs does not take") {
  c.command = "mpexec toy.plan.yaml --optimizer sgd --betas 0.9,0.95";
  c.names = "--betas";
  c.setup = [](const fs::path& dir) { ToyPlan(dir); };
}

ERROR_CASE("exec-load-optimizer-missing", "optimizer state to resume from that does not exist") {
  c.command = "mpexec toy.plan.yaml --load-optimizer toy.optimizer.pt";
  c.names = "toy.optimizer.pt";
  c.setup = [](const fs::path& dir) { ToyPlan(dir); };
}

ERROR_CASE("exec-trace-unwritable", "trace in a folder that does not exist") {
  c.command = "mpexec toy.plan.yaml --trace /nonexistent/step.json";
  c.names = "/nonexistent";
  c.setup = [](const fs::path& dir) { ToyPlan(dir); };
}

ERROR_CASE("exec-output-training", "`--output` on a training plan") {
  c.command = "mpexec toy.plan.yaml --output out.pt";
  c.names = "--output";
  c.setup = [](const fs::path& dir) { ToyPlan(dir); };
}

ERROR_CASE("exec-lr-inference", "`--lr` with an inference plan, which trains nothing") {
  c.command = "mpexec toy.infer.yaml --lr 0.1";
  c.names = "--lr";
  c.setup = [](const fs::path& dir) { ToyPlan(dir, "infer"); };
}

ERROR_CASE("exec-input-missing", "`--input` file missing") {
  c.command = "mpexec toy.infer.yaml --input batch.pt";
  c.names = "batch.pt";
  c.setup = [](const fs::path& dir) { ToyPlan(dir, "infer"); };
}

ERROR_CASE("exec-input-shape", "`--input` tensors of another shape than the plan's") {
  c.command = "mpexec toy.infer.yaml --input batch.pt";
  c.names = "input 0 (x)";
  c.setup = [](const fs::path& dir) {
    ToyPlan(dir, "infer");
    CopyZoo("fixtures/zeros_20x7.pt", dir / "batch.pt");  // torch.save(torch.zeros(20, 7))
  };
}

ERROR_CASE("exec-input-not-tensors", "`--input` file that holds no tensors (a model)") {
  c.command = "mpexec toy.infer.yaml --input toy.pt";
  c.names = "--input toy.pt";
  c.setup = [](const fs::path& dir) { ToyPlan(dir, "infer"); };
}

ERROR_CASE("exec-labels-shape", "`--labels` of another shape than the loss needs") {
  c.command = "mpexec toy.plan.yaml --labels labels.pt";
  c.names = "--labels labels.pt";
  c.setup = [](const fs::path& dir) {
    ToyPlan(dir);
    CopyZoo("fixtures/zeros_20x3.pt", dir / "labels.pt");
  };
}

ERROR_CASE("exec-model-raises", "data the model itself refuses: the TorchScript interpreter's error, quoted by its last line and the code its traceback marks") {
  c.command = "mpexec model.plan.yaml --input batch.pt";
  c.names = "ValueError: x must lie within [-100, 100]";
  c.setup = [](const fs::path& dir) {
    InferencePlan(dir, "fixtures/bounded.pt");  // raises ValueError on values over 100
    CopyZoo("fixtures/thousands_8x3.pt", dir / "batch.pt");
  };
}

ERROR_CASE("infer-microbatches-unjoinable", "`--microbatches 2` in inference of a model with an output that does not grow with the batch (a mean over it): micro-batches' outputs cannot be joined") {
  c.command = "mpplan model.pt --gpus 2 --mode infer --input 'float32[8,3]' --microbatches 2";
  c.names = "--microbatches 2: output 0's tensor 1 (shape []) does not grow with the batch";
  c.setup = [](const fs::path& dir) { CopyZoo("fixtures/batch_mean.pt", dir / "model.pt"); };  // (relu(x) * 2, mean)
}

ERROR_CASE("infer-replicas-unjoinable", "`--replicas 2` in inference of a model with an output that does not grow with the batch") {
  c.command = "mpplan model.pt --gpus 2 --mode infer --input 'float32[8,3]' --replicas 2";
  c.names = "--replicas 2: output 0's tensor 1 (shape []) does not grow with the batch";
  c.setup = [](const fs::path& dir) { CopyZoo("fixtures/batch_mean.pt", dir / "model.pt"); };
}

ERROR_CASE("train-output-no-batch", "training a model whose only output is a mean over the batch, with no loss of its own: mpexec could train on neither") {
  c.command = "mpplan model.pt --gpus 2 --input 'float32[8,3]'";
  c.names = "training: output 0 (shape [1, 3]) has no dimension that grows with the batch";
  c.setup = [](const fs::path& dir) { CopyZoo("fixtures/batch_pooled.pt", dir / "model.pt"); };
}

ERROR_CASE("train-fixed-batch", "training a model that runs at its own batch only: its outputs' batch dimension, which mpexec trains along, cannot be found") {
  c.command = "mpplan model.pt --gpus 2 --input 'float32[8,3]'";
  c.names = "training: the model refuses its inputs at batch 2 (its outputs are run at batches of 2 and 4";
  c.setup = [](const fs::path& dir) { CopyZoo("fixtures/fixed_batch.pt", dir / "model.pt"); };
}

ERROR_CASE("exec-unjoinable-output", "an inference plan of 2 micro-batches (edited) for a model whose output 0 holds a mean over the batch") {
  c.command = "mpexec model.plan.yaml";
  c.names = "output 0's tensor 1 (shape []): no dimension grows with the batch";
  c.setup = [](const fs::path& dir) {
    InferencePlan(dir, "fixtures/batch_mean.pt");
    Edit(dir / "model.plan.yaml", "\nmicrobatches: 1\n", "\nmicrobatches: 2\n");
    Edit(dir / "model.plan.yaml", "\nmicrobatch_size: 8\n", "\nmicrobatch_size: 4\n");
    Edit(dir / "model.plan.yaml", "actions: [0F0]", "actions: [0F0, 0F1]");
  };
}

ERROR_CASE("exec-steps-zero", "`--steps 0`") {
  c.command = "mpexec toy.plan.yaml --steps 0";
  c.names = "--steps";
  c.setup = [](const fs::path& dir) { ToyPlan(dir); };
}

ERROR_CASE("exec-launch-zero", "`--launch-local 0`") {
  c.command = "mpexec toy.plan.yaml --launch-local 0";
  c.names = "--launch-local";
  c.setup = [](const fs::path& dir) { ToyPlan(dir); };
}

ERROR_CASE("exec-launch-more-ranks", "`--launch-local` with more processes than the plan has stages") {
  c.command = "mpexec toy.plan.yaml --launch-local 3";
  c.names = "--launch-local 3: the plan has 2 stages";
  c.setup = [](const fs::path& dir) { ToyPlan(dir); };
}

ERROR_CASE("exec-replicas-ranks", "`--launch-local` with a process count the replicas do not divide") {
  c.command = "mpexec toy.r2.yaml --launch-local 3";
  c.names = "--launch-local 3: the plan has 2 replicas";
  c.setup = ToyReplicaPlan;
}

ERROR_CASE("plan-replica-devices", "plan with replicas whose stage lacks replica_devices") {
  c.command = "mpexec toy.r2.yaml";
  c.names = "replica_devices";
  c.setup = [](const fs::path& dir) {
    ToyReplicaPlan(dir);
    Edit(dir / "toy.r2.yaml", "\n    replica_devices: [1, 3]\n", "\n");
  };
}

ERROR_CASE("exec-timeout-zero", "`--timeout 0` for the processes' waits") {
  c.command = "mpexec toy.plan.yaml --launch-local 2 --timeout 0";
  c.names = "--timeout";
  c.setup = [](const fs::path& dir) { ToyPlan(dir); };
}

ERROR_CASE("exec-device-unknown", "`--device` this build cannot run on") {
  c.command = "mpexec toy.plan.yaml --device tpu";
  c.names = "--device";
  c.status = 2;
  c.setup = [](const fs::path& dir) { ToyPlan(dir); };
}

// ---- the table itself ------------------------------------------------------

TEST_CASE("docs/errors.md has a row for every bad-input test and no other") {
  if (std::getenv("MP_ERRORS_DOC_UPDATE")) return;
  std::vector<std::string> documented;
  for (const auto& line : DocLines()) {
    if (line.rfind("| `", 0) == 0) documented.push_back(line.substr(3, line.find('`', 3) - 3));
  }
  std::vector<std::string> tested = CaseIds();
  std::sort(documented.begin(), documented.end());
  std::sort(tested.begin(), tested.end());
  CHECK(documented == tested);
  CHECK(std::adjacent_find(tested.begin(), tested.end()) == tested.end());  // ids are unique
}
