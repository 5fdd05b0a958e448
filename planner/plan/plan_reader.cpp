// The plan reader: YAML -> Plan through YamlCursor, so every error names its
// key path; then the checks that span keys (node coverage, the direction of
// transfers, the schedule) in the order a user would fix them.
#include "planner/plan/plan_reader.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/yaml_cursor.h"
#include "common/yaml_document.h"
#include "planner/schedule/schedule.h"

namespace mp {
namespace {

constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
// Bounds no real plan comes near, so that a hand-edited number cannot make
// the reader allocate gigabytes before it finds the problem.
constexpr int64_t kMaxNodes = 10'000'000;
constexpr int64_t kMaxMicrobatches = 1'000'000;
constexpr int64_t kMaxBatch = int64_t(1) << 40;

constexpr ScheduleKind kScheduleKinds[] = {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB,
                                           ScheduleKind::kInterleaved1F1B, ScheduleKind::kZeroBubbleH1,
                                           ScheduleKind::kZeroBubbleV, ScheduleKind::kDualPipeV,
                                           ScheduleKind::kForwardOnly};

ScheduleKind ReadSchedule(const YamlCursor& c) {
  const std::string name = c.String();
  for (ScheduleKind kind : kScheduleKinds) {
    if (name == ScheduleName(kind)) return kind;
  }
  c.Fail("unknown schedule '" + name + "' (expected " + TrainingScheduleNames() + " or forward)");
}

bool IsV1(const Plan& plan) { return plan.format == kPlanFormatV1; }

// A byte count: an integer >= 0, or a one-line error naming the key.
int64_t Bytes(const YamlCursor& c) {
  const int64_t bytes = c.Int();
  if (bytes < 0) c.Fail(Concat("expected bytes of 0 or more, found ", bytes));
  return bytes;
}

// An action list: every action parses, and names a micro-batch the plan has.
std::vector<Action> ReadActions(const YamlCursor& list, const Plan& plan) {
  std::vector<Action> actions;
  const int n = list.ExpectList();
  for (int i = 0; i < n; ++i) {
    const YamlCursor a = list[i];
    Action action;
    try {
      action = ParseAction(a.String());
    } catch (const InputError& e) {
      a.Fail(e.what());
    }
    if (action.microbatch >= plan.microbatches) {
      a.Fail(Concat("micro-batch ", action.microbatch, " is out of range (the plan has ", plan.microbatches, ")"));
    }
    actions.push_back(action);
  }
  return actions;
}

TensorSpec ReadInput(const YamlCursor& c) {
  c.ExpectMap({"dtype", "shape"}, {"name", "batch_dim", "range"});
  TensorSpec spec;
  if (c.Has("name")) spec.name = c["name"].String();
  spec.dtype = c["dtype"].String();
  if (DtypeBytes(spec.dtype) == 0) c["dtype"].Fail("unknown dtype '" + spec.dtype + "'");
  spec.shape = c["shape"].IntList();
  for (size_t i = 0; i < spec.shape.size(); ++i) {
    if (spec.shape[i] < 0) c["shape"][int(i)].Fail("a dimension must not be negative");
  }
  if (c.Has("batch_dim")) spec.batch_dim = c["batch_dim"].IntIn(0, std::max<int64_t>(0, int64_t(spec.shape.size()) - 1));
  if (c.Has("range")) {
    const YamlCursor range = c["range"];
    range.ExpectList(2);
    spec.has_range = true;
    spec.low = range[0].Int();
    spec.high = range[1].Int();
    if (spec.low >= spec.high) range.Fail("expected [low, high) with low < high");
  }
  return spec;
}

PlanTensor ReadTensor(const YamlCursor& c, const char* peer_key, int stages) {
  c.ExpectMap({"value", peer_key}, {"value_id", "dtype", "shape", "bytes", "gradient"});
  PlanTensor t;
  t.value = c["value"].String();
  if (c.Has("value_id")) t.value_id = c["value_id"].IntIn(0, kMaxInt);
  t.peer = c[peer_key].IntIn(0, stages - 1);
  if (c.Has("dtype")) t.dtype = c["dtype"].String();
  if (c.Has("shape")) t.shape = c["shape"].IntList();
  if (c.Has("bytes")) t.bytes = c["bytes"].Int();
  if (c.Has("gradient")) t.gradient = c["gradient"].Bool();
  return t;
}

PlanStage ReadStage(const YamlCursor& c, int index, Plan& plan, int stages) {
  std::vector<std::string> required = {"id", "device", "nodes"};
  if (IsV1(plan)) required.push_back("actions");  // v2: programs
  c.ExpectMap(required, {"replica_devices", "recompute", "layers", "params", "receives", "sends", "predicted"});
  PlanStage s;
  if (c.Has("recompute")) {
    s.recompute = c["recompute"].Bool();
    if (s.recompute && !plan.training) c["recompute"].Fail("inference keeps no activations to recompute");
    if (s.recompute && SplitsBackward(plan.schedule)) {
      c["recompute"].Fail(Concat(ScheduleName(plan.schedule), " keeps each micro-batch's graph from I to W; "
                                 "recomputation runs with gpipe, 1f1b and interleaved-1f1b"));
    }
  }
  s.id = c["id"].IntIn(0, kMaxInt);
  if (s.id != index) c["id"].Fail(Concat("stage ids must count up from 0: expected ", index, ", found ", s.id));
  const int64_t device = c["device"].Int();
  if (device < 0 || device >= int64_t(plan.devices.size())) {
    c["device"].Fail(Concat("device ", device, " is out of range (the plan has ", plan.devices.size(), " devices)"));
  }
  s.device = static_cast<int>(device);
  if (plan.replicas > 1) {
    if (!c.Has("replica_devices")) c.Fail(Concat("a plan with ", plan.replicas, " replicas needs replica_devices"));
    const YamlCursor list = c["replica_devices"];
    list.ExpectList(plan.replicas);
    for (int r = 0; r < plan.replicas; ++r) {
      const int64_t d = list[r].Int();
      if (d < 0 || d >= int64_t(plan.devices.size())) {
        list[r].Fail(Concat("device ", d, " is out of range (the plan has ", plan.devices.size(), " devices)"));
      }
      s.replica_devices.push_back(int(d));
    }
    if (s.replica_devices.front() != s.device) list[0].Fail(Concat("replica 0 runs on the stage's device, ", s.device));
    for (int r = 1; r < plan.replicas; ++r) {
      const auto& d = s.replica_devices;
      if (std::find(d.begin(), d.begin() + r, d[r]) != d.begin() + r) {
        list[r].Fail(Concat("device ", d[r], " already runs another replica of this stage"));
      }
    }
  } else if (c.Has("replica_devices")) {
    c["replica_devices"].Fail("only a plan with replicas lists replica_devices");
  }
  const YamlCursor nodes = c["nodes"];
  const int ranges = nodes.ExpectList();
  if (ranges == 0) nodes.Fail("a stage needs at least one node");
  for (int i = 0; i < ranges; ++i) {
    const YamlCursor range = nodes[i];
    range.ExpectList(2);
    int ids[2];
    for (int k = 0; k < 2; ++k) {
      const int64_t id = range[k].Int();
      if (id < 0 || id >= plan.model.nodes) {
        range.Fail(Concat("node ", id, " is out of range (the graph has ", plan.model.nodes, " nodes)"));
      }
      ids[k] = static_cast<int>(id);
    }
    if (ids[0] > ids[1]) range.Fail(Concat("expected [first, last] with first <= last, found [", ids[0], ", ", ids[1], "]"));
    if (!s.nodes.empty() && ids[0] <= s.nodes.back().second + 1) {
      range.Fail(Concat("ranges must ascend and not touch: [", ids[0], ", ", ids[1], "] follows [", s.nodes.back().first,
                        ", ", s.nodes.back().second, "]"));
    }
    s.nodes.push_back({ids[0], ids[1]});
  }
  if (c.Has("layers")) s.layers = c["layers"].StringList();
  if (c.Has("params")) {
    const YamlCursor params = c["params"];
    params.ExpectMap({"count", "bytes"});
    s.param_count = params["count"].Int();
    s.param_bytes = params["bytes"].Int();
  }
  for (const char* key : {"receives", "sends"}) {
    if (!c.Has(key)) continue;
    const YamlCursor list = c[key];
    const bool receives = std::string(key) == "receives";
    const int n = list.ExpectList();
    for (int i = 0; i < n; ++i) {
      PlanTensor t = ReadTensor(list[i], receives ? "from" : "to", stages);
      const YamlCursor peer = list[i][receives ? "from" : "to"];
      if (receives && t.peer >= s.id) {
        peer.Fail(Concat("stage ", s.id, " reads '", t.value, "' from stage ", t.peer,
                         ", which is not an earlier stage"));
      }
      if (!receives && t.peer <= s.id) {
        peer.Fail(Concat("stage ", s.id, " sends '", t.value, "' to stage ", t.peer, ", which is not a later stage"));
      }
      if (t.peer != (receives ? s.id - 1 : s.id + 1)) {
        peer.Fail(Concat("tensors move between neighbouring stages only (values needed further on are relayed): "
                         "expected ", receives ? s.id - 1 : s.id + 1, ", found ", t.peer));
      }
      (receives ? s.receives : s.sends).push_back(t);
    }
  }
  if (c.Has("predicted")) {
    const YamlCursor p = c["predicted"];
    p.ExpectMap({}, {"forward_ms", "backward_ms", "input_backward_ms", "weight_backward_ms", "send_ms",
                     "send_gradients_ms", "busy_fraction", "allreduce_ms", "optimizer_ms", "static_bytes", "gradient_bytes",
                     "activation_bytes", "transient_bytes", "weight_transient_bytes", "forward_peak_bytes", "weight_gradient_bytes",
                     "freed_by_i_bytes", "recomputed_bytes", "peak_memory_bytes"});
    if (p.Has("allreduce_ms")) {
      s.allreduce_ms = p["allreduce_ms"].Number();
      if (plan.replicas == 1) p["allreduce_ms"].Fail("only a plan with replicas all-reduces between them");
      if (!(s.allreduce_ms >= 0)) p["allreduce_ms"].Fail("expected a time of 0 ms or more");
    }
    if (p.Has("optimizer_ms")) {
      s.optimizer_ms = p["optimizer_ms"].NumberIn(0, YamlCursor::kNoLimit, "a time");
      if (!plan.training) p["optimizer_ms"].Fail("only a training plan steps an optimizer");
    }
    if (p.Has("forward_ms")) s.forward_ms = p["forward_ms"].Number();
    if (p.Has("backward_ms")) s.backward_ms = p["backward_ms"].Number();
    if (p.Has("input_backward_ms")) s.input_backward_ms = p["input_backward_ms"].Number();
    if (p.Has("weight_backward_ms")) s.weight_backward_ms = p["weight_backward_ms"].Number();
    if (p.Has("send_ms")) s.send_ms = p["send_ms"].Number();
    if (p.Has("send_gradients_ms")) s.send_gradients_ms = p["send_gradients_ms"].Number();
    if (p.Has("busy_fraction")) s.busy_fraction = p["busy_fraction"].Number();
    if (p.Has("static_bytes")) s.static_bytes = Bytes(p["static_bytes"]);
    if (p.Has("gradient_bytes")) {
      s.gradient_bytes = Bytes(p["gradient_bytes"]);
      if (!plan.training) p["gradient_bytes"].Fail("only a training plan holds gradients");
      if (double(s.gradient_bytes) * (1 + plan.optimizer_state_factor) > double(s.static_bytes) + 1) {  // + 1: StaticBytes rounds down
        p["gradient_bytes"].Fail(Concat("more than static_bytes (", s.static_bytes, ") holds with ",
                                        plan.optimizer_state_factor, " optimizer tensors each"));
      }
    } else if (plan.training) {  // plans before frozen parameters were told apart: every parameter
      s.gradient_bytes = int64_t(std::llround(double(s.static_bytes) / (2 + plan.optimizer_state_factor)));
    }
    if (p.Has("activation_bytes")) s.activation_bytes = Bytes(p["activation_bytes"]);
    if (p.Has("transient_bytes")) s.transient_bytes = Bytes(p["transient_bytes"]);
    if (p.Has("weight_transient_bytes")) s.weight_transient_bytes = Bytes(p["weight_transient_bytes"]);
    if (p.Has("forward_peak_bytes")) s.forward_peak_bytes = Bytes(p["forward_peak_bytes"]);
    if (p.Has("freed_by_i_bytes")) s.freed_by_i_bytes = Bytes(p["freed_by_i_bytes"]);
    if (p.Has("weight_gradient_bytes")) s.weight_gradient_bytes = Bytes(p["weight_gradient_bytes"]);
    if (p.Has("recomputed_bytes")) s.recomputed_bytes = Bytes(p["recomputed_bytes"]);
    if (p.Has("peak_memory_bytes")) s.peak_memory_bytes = Bytes(p["peak_memory_bytes"]);
  }
  if (IsV1(plan)) {  // one program per stage, so one stage per device
    for (size_t p = 0; p < plan.programs.size(); ++p) {
      if (plan.programs[p].device == s.device) {
        c["device"].Fail(Concat("device ", s.device, " already runs stages[", p, "] (", kPlanFormatV1,
                                " plans run one stage per device)"));
      }
    }
    const YamlCursor list = c["actions"];
    PlanProgram program{s.device, ReadActions(list, plan)};
    for (size_t i = 0; i < program.actions.size(); ++i) {
      const Action& a = program.actions[i];
      if (a.stage != s.id) list[int(i)].Fail(Concat("action ", FormatAction(a), " belongs to stage ", a.stage));
    }
    s.program = int(plan.programs.size());
    plan.programs.push_back(std::move(program));
  }
  return s;
}

// v2: one program per device that runs stages, each action on a stage of
// that device.
void ReadPrograms(const YamlCursor& root, Plan& plan) {
  const YamlCursor programs = root["programs"];
  const int n = programs.ExpectList();
  std::vector<int> program_of_device(plan.devices.size(), -1);
  for (int p = 0; p < n; ++p) {
    const YamlCursor c = programs[p];
    c.ExpectMap({"device", "actions"});
    const int64_t device = c["device"].Int();
    if (device < 0 || device >= int64_t(plan.devices.size())) {
      c["device"].Fail(Concat("device ", device, " is out of range (the plan has ", plan.devices.size(), " devices)"));
    }
    if (program_of_device[device] >= 0) {
      c["device"].Fail(Concat("device ", device, " already runs programs[", program_of_device[device], "]"));
    }
    program_of_device[device] = p;
    plan.programs.push_back({int(device), ReadActions(c["actions"], plan)});
  }
  for (PlanStage& stage : plan.stages) {
    stage.program = program_of_device[stage.device];
    if (stage.program < 0) {
      root["stages"][stage.id]["device"].Fail(Concat("device ", stage.device, " has no program in programs"));
    }
  }
  for (int p = 0; p < n; ++p) {
    const auto& actions = plan.programs[p].actions;
    for (size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      const YamlCursor at = programs[p]["actions"][int(i)];
      if (a.stage >= int(plan.stages.size())) {
        at.Fail(Concat("action ", FormatAction(a), " names stage ", a.stage, " (the plan has ", plan.stages.size(),
                       ")"));
      }
      if (plan.stages[a.stage].program != p) {
        at.Fail(Concat("action ", FormatAction(a), " belongs to stage ", a.stage, ", which runs on device ",
                       plan.stages[a.stage].device));
      }
    }
  }
}

PlanCandidate ReadAlternative(const YamlCursor& c) {
  c.ExpectMap({"stages", "microbatches", "schedule"},
              {"chunks", "replicas", "microbatch_size", "feasible", "simulated", "step_ms", "bottleneck_ms",
               "bubble_fraction", "peak_memory_bytes", "recomputing", "why_not", "tie", "previous", "fresh"});
  PlanCandidate a;
  a.stages = c["stages"].IntIn(1, kMaxInt);
  if (c.Has("chunks")) a.chunks = c["chunks"].IntIn(1, a.stages);
  if (c.Has("replicas")) a.replicas = c["replicas"].IntIn(1, kMaxInt);
  a.microbatches = c["microbatches"].IntIn(1, kMaxInt);
  a.schedule = ReadSchedule(c["schedule"]);
  if (c.Has("microbatch_size")) a.microbatch_size = c["microbatch_size"].Int();
  if (c.Has("feasible")) a.feasible = c["feasible"].Bool();
  if (c.Has("simulated")) a.simulated = c["simulated"].Bool();
  if (c.Has("step_ms")) a.step_ms = c["step_ms"].Number();
  if (c.Has("bottleneck_ms")) a.bottleneck_ms = c["bottleneck_ms"].Number();
  if (c.Has("bubble_fraction")) a.bubble_fraction = c["bubble_fraction"].Number();
  if (c.Has("peak_memory_bytes")) a.peak_memory_bytes = c["peak_memory_bytes"].Int();
  if (c.Has("recomputing")) a.recomputing = c["recomputing"].IntIn(0, a.stages);
  if (c.Has("why_not")) a.why_not = c["why_not"].String();
  if (c.Has("tie")) a.tie = c["tie"].Bool();
  if (c.Has("previous")) a.previous = c["previous"].Bool();
  if (c.Has("fresh")) a.fresh = c["fresh"].Bool();
  return a;
}

PlanCandidate ReadComparison(const YamlCursor& c) {
  c.ExpectMap({"method", "stages", "microbatches", "schedule"},
              {"split", "chunks", "microbatch_size", "feasible", "step_ms", "bottleneck_ms", "bubble_fraction",
               "why_not"});
  PlanCandidate r;
  r.method = c["method"].String();
  if (c.Has("split")) r.split = c["split"].String();
  r.stages = c["stages"].IntIn(1, kMaxInt);
  if (c.Has("chunks")) r.chunks = c["chunks"].IntIn(1, r.stages);
  r.microbatches = c["microbatches"].IntIn(1, kMaxInt);
  r.schedule = ReadSchedule(c["schedule"]);
  if (c.Has("microbatch_size")) r.microbatch_size = c["microbatch_size"].Int();
  if (c.Has("feasible")) r.feasible = c["feasible"].Bool();
  if (c.Has("step_ms")) r.step_ms = c["step_ms"].Number();
  if (c.Has("bottleneck_ms")) r.bottleneck_ms = c["bottleneck_ms"].Number();
  if (c.Has("bubble_fraction")) r.bubble_fraction = c["bubble_fraction"].Number();
  if (c.Has("why_not")) r.why_not = c["why_not"].String();
  return r;
}

void ReadHeader(const YamlCursor& root, Plan& plan) {
  plan.format = root["format"].String();
  if (plan.format != kPlanFormat && plan.format != kPlanFormatV1) {
    root["format"].Fail(Concat("unknown format '", plan.format, "' (this mpexec reads ", kPlanFormat, " and ",
                               kPlanFormatV1, ")"));
  }
  const YamlCursor model = root["model"];
  model.ExpectMap({"path", "sha256", "graph_fingerprint", "nodes"});
  plan.model.path = model["path"].String();
  plan.model.sha256 = model["sha256"].String();
  plan.model.graph_fingerprint = model["graph_fingerprint"].String();
  plan.model.nodes = model["nodes"].IntIn(1, kMaxNodes);

  const std::string mode = root["mode"].String();
  if (mode != "train" && mode != "infer") root["mode"].Fail("unknown mode '" + mode + "' (expected train or infer)");
  plan.training = mode == "train";
  plan.batch = root["batch"].Int();
  if (plan.batch < 1 || plan.batch > kMaxBatch) {
    root["batch"].Fail(Concat("expected 1 to ", kMaxBatch, ", found ", plan.batch));
  }
  if (root.Has("replicas")) {
    plan.replicas = int(root["replicas"].IntIn(1, kMaxInt));
    if (plan.batch % plan.replicas != 0) {
      root["replicas"].Fail(Concat("batch ", plan.batch, " does not split evenly into ", plan.replicas, " replicas"));
    }
  }
  if (root.Has("replica_link")) {
    const YamlCursor c = root["replica_link"];
    if (plan.replicas == 1) c.Fail("only a plan with replicas has a replica_link");
    c.ExpectMap({}, {"bandwidth_bytes_per_s", "latency_ms"});
    if (c.Has("bandwidth_bytes_per_s")) plan.replica_link.bandwidth_bytes_per_s = c["bandwidth_bytes_per_s"].Number();
    if (c.Has("latency_ms")) plan.replica_link.latency_ms = c["latency_ms"].Number();
    if (plan.replica_link.bandwidth_bytes_per_s < 0 || plan.replica_link.latency_ms < 0) {
      c.Fail("bandwidth and latency must not be negative");
    }
  }
  const int64_t share = ReplicaBatch(plan);
  const std::string per_replica = plan.replicas > 1 ? " per replica" : "";
  const int64_t microbatches = root["microbatches"].Int();
  if (microbatches < 1 || microbatches > std::min(share, kMaxMicrobatches)) {
    root["microbatches"].Fail(Concat("expected 1 to the batch", per_replica, " (", share, "), found ", microbatches));
  }
  plan.microbatches = static_cast<int>(microbatches);
  plan.microbatch_size = MicrobatchSize(share, plan.microbatches);
  if (!MicrobatchesSplit(share, plan.microbatches)) {
    root["microbatches"].Fail(Concat(plan.microbatches, " micro-batches of ", plan.microbatch_size,
                                     " samples leave the last of batch ", share, per_replica, " empty"));
  }
  if (root.Has("microbatch_size") && root["microbatch_size"].Int() != plan.microbatch_size) {
    root["microbatch_size"].Fail(Concat("expected ", plan.microbatch_size, " (batch ", share, " in ",
                                        plan.microbatches, " micro-batches), found ",
                                        root["microbatch_size"].Int()));
  }
  plan.schedule = ReadSchedule(root["schedule"]);
  if (IsTraining(plan.schedule) != plan.training) {
    root["schedule"].Fail(Concat("schedule ", ScheduleName(plan.schedule), " does not fit mode ", mode,
                                 plan.training ? " (expected " + TrainingScheduleNames() + ")"
                                               : " (expected forward)"));
  }
  if (root.Has("partitioner")) plan.partitioner = root["partitioner"].String();
  if (root.Has("split")) plan.split = root["split"].String();
  if (root.Has("cut")) {
    plan.cut = root["cut"].String();
    if (plan.partitioner != "dp") root["cut"].Fail("only a plan of partitioner dp keeps another partitioner's cut");
    const std::string start = plan.cut.substr(0, plan.cut.find('+'));
    const bool moved = start.size() < plan.cut.size();
    if ((start != "uniform" && start != "params" && start != "block" && start != "neighbour") ||
        (moved && plan.cut.substr(start.size()) != "+neighbour") || (moved && start == "neighbour")) {
      root["cut"].Fail(Concat("unknown cut '", plan.cut,
                              "' (expected uniform, params, block, neighbour, or a baseline's +neighbour)"));
    }
  }
  if (root.Has("objective")) {
    const std::string objective = root["objective"].String();
    if (objective == ObjectiveName(Objective::kThroughputPerDevice)) {
      plan.objective = Objective::kThroughputPerDevice;
    } else if (objective != ObjectiveName(Objective::kStep)) {
      root["objective"].Fail(Concat("unknown objective '", objective, "' (expected step or throughput-per-device)"));
    }
  }
  if (root.Has("optimizer_state_factor")) {
    plan.optimizer_state_factor = root["optimizer_state_factor"].NumberIn(0, YamlCursor::kNoLimit, "a tensor count");
  }
  if (root.Has("optimizer")) {
    plan.optimizer = root["optimizer"].String();
    const int states = OptimizerStateTensors(plan.optimizer);
    if (states < 0) {
      root["optimizer"].Fail(Concat("unknown optimizer '", plan.optimizer, "' (expected sgd, momentum, adam or adamw)"));
    }
    if (double(states) != plan.optimizer_state_factor) {
      root["optimizer"].Fail(Concat(plan.optimizer, " keeps ", states, " state tensor(s) per parameter, but "
                                    "optimizer_state_factor is ", plan.optimizer_state_factor));
    }
  }

  const YamlCursor inputs = root["inputs"];
  const int n = inputs.ExpectList();
  if (n == 0) inputs.Fail("a model needs at least one input");
  for (int i = 0; i < n; ++i) {
    plan.inputs.push_back(ReadInput(inputs[i]));
    const TensorSpec& spec = plan.inputs.back();
    if (spec.shape.empty() || spec.shape[spec.batch_dim] != plan.batch) {
      inputs[i]["shape"].Fail(Concat("the batch dimension must be the plan's batch, ", plan.batch));
    }
  }
}

void ReadDevices(const YamlCursor& root, Plan& plan) {
  const YamlCursor devices = root["devices"];
  const int n = devices.ExpectList();
  if (n == 0) devices.Fail("a plan needs at least one device");
  for (int i = 0; i < n; ++i) {
    const YamlCursor c = devices[i];
    c.ExpectMap({"id", "type", "index", "name"}, {"memory_bytes", "memory_headroom", "speed"});
    PlanDevice d;
    d.id = c["id"].IntIn(0, kMaxInt);
    if (d.id != i) c["id"].Fail(Concat("device ids must count up from 0: expected ", i, ", found ", d.id));
    d.type = c["type"].String();
    if (d.type != "cpu" && d.type != "cuda") c["type"].Fail("unknown device type '" + d.type + "' (expected cpu or cuda)");
    d.index = c["index"].IntIn(0, kMaxInt);
    d.name = c["name"].String();
    if (c.Has("memory_bytes")) {
      d.memory_bytes = c["memory_bytes"].Int();
      if (d.memory_bytes < 0) c["memory_bytes"].Fail("expected 0 (no limit) or a positive byte count");
    }
    if (c.Has("memory_headroom")) {
      d.memory_headroom = c["memory_headroom"].Number();
      if (!(d.memory_headroom >= 0 && d.memory_headroom < 1)) {
        c["memory_headroom"].Fail("expected a fraction in [0, 1)");
      }
    }
    if (c.Has("speed")) {
      d.speed = c["speed"].Number();
      if (!(d.speed > 0)) c["speed"].Fail("expected a positive time multiplier");
    }
    plan.devices.push_back(d);
  }
}

void ReadLinks(const YamlCursor& root, Plan& plan) {
  if (!root.Has("links")) {
    plan.links.assign(plan.stages.empty() ? 0 : plan.stages.size() - 1, PlanLink{});
    return;
  }
  const YamlCursor links = root["links"];
  const int n = links.ExpectList(int(plan.stages.size()) - 1);
  for (int i = 0; i < n; ++i) {
    const YamlCursor c = links[i];
    c.ExpectMap({"from", "to"}, {"bandwidth_bytes_per_s", "latency_ms"});
    if (c["from"].Int() != i || c["to"].Int() != i + 1) c.Fail(Concat("expected the link from stage ", i, " to ", i + 1));
    PlanLink link;
    if (c.Has("bandwidth_bytes_per_s")) link.bandwidth_bytes_per_s = c["bandwidth_bytes_per_s"].Number();
    if (c.Has("latency_ms")) link.latency_ms = c["latency_ms"].Number();
    if (link.bandwidth_bytes_per_s < 0 || link.latency_ms < 0) c.Fail("bandwidth and latency must not be negative");
    plan.links.push_back(link);
  }
}

// Every node in exactly one stage.
void CheckCoverage(const YamlCursor& root, const Plan& plan) {
  std::vector<int> owner(plan.model.nodes, -1);
  for (const PlanStage& stage : plan.stages) {
    for (size_t r = 0; r < stage.nodes.size(); ++r) {
      for (int id = stage.nodes[r].first; id <= stage.nodes[r].second; ++id) {
        if (owner[id] != -1) {
          root["stages"][stage.id]["nodes"][int(r)].Fail(
              Concat("node ", id, " is already in stage ", owner[id], " (each node belongs to exactly one stage)"));
        }
        owner[id] = stage.id;
      }
    }
  }
  for (int id = 0; id < plan.model.nodes; ++id) {
    if (owner[id] == -1) root["stages"].Fail(Concat("node ", id, " is in no stage (each node belongs to exactly one stage)"));
  }
}

// Each stage runs every micro-batch's forward (and backward, whole or as I
// and W; a split schedule's stage may run B where the planner found the
// split does not pay) exactly once; checked per stage before the whole schedule is
// replayed, so the error names the stage's list, and so the replay is only
// ever asked of sizes the document itself spells out.
void CheckComputeCounts(const YamlCursor& root, const Plan& plan) {
  const size_t K = plan.stages.size();
  std::vector<int> forwards(K, 0), backwards(K, 0), inputs(K, 0), weights(K, 0);
  for (const PlanProgram& program : plan.programs) {
    for (const Action& a : program.actions) {
      forwards[a.stage] += a.kind == ActionKind::kForward;
      backwards[a.stage] += IsBackward(a.kind);
      inputs[a.stage] += a.kind == ActionKind::kBackwardInput;
      weights[a.stage] += a.kind == ActionKind::kBackwardWeight;
    }
  }
  const int want_backwards = plan.training ? plan.microbatches : 0;
  for (const PlanStage& stage : plan.stages) {
    const int s = stage.id;
    const bool split = SplitsBackward(plan.schedule);
    if (forwards[s] != plan.microbatches || backwards[s] != want_backwards || weights[s] != (split ? inputs[s] : 0)) {
      const YamlCursor list = IsV1(plan) ? root["stages"][s]["actions"] : root["programs"][stage.program]["actions"];
      list.Fail(Concat("stage ", s, ": expected ", plan.microbatches, " forwards and ", want_backwards,
                       split ? " I (or B) and a W for each I" : " backwards", " (one per micro-batch), found ",
                       forwards[s], " and ", backwards[s], split ? Concat(" and ", weights[s], " W") : ""));
    }
  }
}

void ReadResults(const YamlCursor& root, Plan& plan) {
  if (root.Has("predicted")) {
    const YamlCursor p = root["predicted"];
    p.ExpectMap({"step_ms"}, {"bottleneck_ms", "bubble_fraction", "samples_per_s", "one_device_step_ms",
                              "speedup_vs_one_device", "allreduce_ms", "optimizer_ms", "step_band_ms",
                              "device_peak_memory_bytes"});
    if (p.Has("allreduce_ms")) {
      plan.predicted.allreduce_ms = p["allreduce_ms"].Number();
      if (plan.replicas == 1) p["allreduce_ms"].Fail("only a plan with replicas all-reduces between them");
    }
    if (p.Has("optimizer_ms")) {
      plan.predicted.optimizer_ms = p["optimizer_ms"].NumberIn(0, YamlCursor::kNoLimit, "a time");
      if (!plan.training) p["optimizer_ms"].Fail("only a training plan steps an optimizer");
    }
    plan.predicted.step_ms = p["step_ms"].Number();
    if (p.Has("bottleneck_ms")) plan.predicted.bottleneck_ms = p["bottleneck_ms"].Number();
    if (p.Has("bubble_fraction")) plan.predicted.bubble_fraction = p["bubble_fraction"].Number();
    if (p.Has("samples_per_s")) plan.predicted.samples_per_s = p["samples_per_s"].Number();
    if (p.Has("one_device_step_ms")) plan.predicted.one_device_step_ms = p["one_device_step_ms"].Number();
    if (p.Has("speedup_vs_one_device")) plan.predicted.speedup_vs_one_device = p["speedup_vs_one_device"].Number();
    if (p.Has("step_band_ms")) {
      const YamlCursor band = p["step_band_ms"];
      band.ExpectList(2);
      plan.predicted.step_low_ms = band[0].Number();
      plan.predicted.step_high_ms = band[1].Number();
      if (!(plan.predicted.step_low_ms > 0 && plan.predicted.step_low_ms <= plan.predicted.step_ms &&
            plan.predicted.step_ms <= plan.predicted.step_high_ms)) {
        band.Fail(Concat("expected [low, high] around step_ms ", plan.predicted.step_ms, ", found [",
                         plan.predicted.step_low_ms, ", ", plan.predicted.step_high_ms, "]"));
      }
    }
    if (p.Has("device_peak_memory_bytes")) {
      const YamlCursor peaks = p["device_peak_memory_bytes"];
      const int n = peaks.ExpectList();
      if (n != int(plan.programs.size())) {
        peaks.Fail(Concat("expected one peak per program (", plan.programs.size(), "), found ", n));
      }
      for (int d = 0; d < n; ++d) plan.predicted.device_peak_memory_bytes.push_back(Bytes(peaks[d]));
    }
  }
  if (root.Has("profile")) {
    const YamlCursor p = root["profile"];
    p.ExpectMap({"source"}, {"device", "file", "threads", "microbatch_sizes", "coverage", "backward_coverage",
                             "calibration", "shared_slowdown", "reference_ms", "step_overhead_ms",
                             "replica_wait_share"});
    plan.profile.source = p["source"].String();
    if (p.Has("device")) plan.profile.device = p["device"].String();
    if (p.Has("file")) plan.profile.file = p["file"].String();
    if (p.Has("threads")) plan.profile.threads = p["threads"].IntIn(0, kMaxInt);
    if (p.Has("microbatch_sizes")) plan.profile.microbatch_sizes = p["microbatch_sizes"].IntList();
    if (p.Has("coverage")) plan.profile.coverage = p["coverage"].Number();
    if (p.Has("backward_coverage")) plan.profile.backward_coverage = p["backward_coverage"].Number();
    if (p.Has("calibration")) plan.profile.calibration = p["calibration"].String();
    if (p.Has("reference_ms")) {
      plan.profile.reference_ms = p["reference_ms"].Number();
      if (!(plan.profile.reference_ms > 0)) p["reference_ms"].Fail("expected a time > 0");
    }
    if (p.Has("step_overhead_ms")) {
      plan.profile.step_overhead_ms = p["step_overhead_ms"].NumberIn(0, YamlCursor::kNoLimit, "a time");
    }
    if (p.Has("replica_wait_share")) {
      plan.profile.replica_wait_share = p["replica_wait_share"].NumberIn(0, 1, "a share of the step");
      if (plan.replicas == 1) p["replica_wait_share"].Fail("only a plan with replicas waits for them");
    }
    if (p.Has("shared_slowdown")) {
      const YamlCursor list = p["shared_slowdown"];
      const int n = list.ExpectList();
      for (int i = 0; i < n; ++i) {
        const double factor = list[i].Number();
        if (!(factor >= 1)) list[i].Fail(Concat("expected a slowdown factor >= 1, found ", factor));
        plan.profile.shared_slowdown.push_back(factor);
      }
    }
  }
  if (root.Has("alternatives")) {
    const YamlCursor list = root["alternatives"];
    const int n = list.ExpectList();
    for (int i = 0; i < n; ++i) plan.alternatives.push_back(ReadAlternative(list[i]));
  }
  if (root.Has("comparisons")) {
    const YamlCursor list = root["comparisons"];
    const int n = list.ExpectList();
    for (int i = 0; i < n; ++i) plan.comparisons.push_back(ReadComparison(list[i]));
  }
  if (root.Has("warnings")) plan.warnings = root["warnings"].StringList();
}

}  // namespace

Plan ParsePlan(const std::string& yaml, const std::string& source) {
  const YamlCursor root(LoadYamlDocument(yaml, source), source);
  Plan plan;
  plan.format = root["format"].String();  // checked in ReadHeader
  std::vector<std::string> required = {"format", "model", "inputs", "mode", "batch", "microbatches", "schedule",
                                       "devices", "stages"};
  if (!IsV1(plan)) required.push_back("programs");
  root.ExpectMap(required, {"replicas", "replica_link", "microbatch_size", "partitioner", "split", "cut", "objective", "optimizer",
                            "optimizer_state_factor", "links", "predicted", "profile", "alternatives", "comparisons",
                            "warnings"});
  ReadHeader(root, plan);
  ReadDevices(root, plan);
  const YamlCursor stages = root["stages"];
  const int k = stages.ExpectList();
  if (k == 0) stages.Fail("a plan needs at least one stage");
  for (int i = 0; i < k; ++i) plan.stages.push_back(ReadStage(stages[i], i, plan, k));
  if (!IsV1(plan)) ReadPrograms(root, plan);
  CheckCoverage(root, plan);
  ReadLinks(root, plan);
  CheckComputeCounts(root, plan);
  try {
    ValidateSchedule(PlanSchedule(plan));
  } catch (const InputError& e) {
    (IsV1(plan) ? stages : root["programs"]).Fail(Concat("the action lists cannot run: ", e.what()));
  }
  ReadResults(root, plan);
  return plan;
}

Plan ReadPlan(const std::string& path) { return ParsePlan(ReadTextFile(path, "plan"), path); }

void CheckPlanAgainstGraph(const Plan& plan, const OpGraph& graph, const std::string& source) {
  if (plan.model.nodes != int(graph.nodes.size())) {
    throw InputError(Concat(source, ": model.nodes: the plan has ", plan.model.nodes,
                            " nodes but the model's canonical graph has ", graph.nodes.size()));
  }
  if (!graph.fingerprint.empty() && plan.model.graph_fingerprint != graph.fingerprint) {
    throw InputError(Concat(source, ": model.graph_fingerprint: the plan was made for graph ",
                            plan.model.graph_fingerprint, " but the model's canonical graph is ", graph.fingerprint));
  }
  for (const PlanStage& stage : plan.stages) {
    for (const auto* list : {&stage.receives, &stage.sends}) {
      for (size_t i = 0; i < list->size(); ++i) {
        const PlanTensor& t = (*list)[i];
        const bool known = t.value_id >= 0 && t.value_id < int(graph.values.size()) &&
                           graph.values[t.value_id].name == t.value;
        if (!known) {
          throw InputError(Concat(source, ": stages[", stage.id, "].", list == &stage.sends ? "sends" : "receives", "[",
                                  i, "]: the graph has no value '", t.value, "' with id ", t.value_id));
        }
      }
    }
  }
  const std::vector<int> stage_of = StageOfNode(plan);
  for (const OpNode& node : graph.nodes) {
    for (int value : node.inputs) {
      const int producer = graph.values[value].producer;
      if (producer < 0 || stage_of[producer] <= stage_of[node.id]) continue;
      throw InputError(Concat(source, ": stages[", stage_of[node.id], "].nodes: node ", node.id, " (", node.kind,
                              node.layer.empty() ? "" : " in " + node.layer, ") reads '", graph.values[value].name,
                              "' from node ", producer, " in stage ", stage_of[producer], ", a later stage"));
    }
  }
}

}  // namespace mp
