// A hand-built Plan and the OpGraph it was made from, for the report tests:
// K stages on K A100s, each with two layers (conv1 with two nodes, relu with
// one), a root-level constant read on the first and last stage, a skip
// connection from stage 0 to stage 2 (relayed by stage 1) and a layer split
// across each cut. The action lists come from BuildSchedule and the
// predictions from SimulatePlan, so the plan is self-consistent;
// alternatives, comparisons and warnings are written out by hand, with an
// infeasible one and one known only by its lower bound.
#pragma once

#include <string>
#include <vector>

#include "planner/graph/op_graph.h"
#include "planner/plan/plan.h"

namespace mp::testing {

constexpr int64_t kGiB = int64_t(1) << 30;

// Node layout: 0 is a prim::Constant in the root module (""); stage s owns
// nodes 1 + 3s .. 3 + 3s: "layer<s+1>.0.conv1" twice, then
// "layer<s+1>.0.relu" (stage s > 0 starts with "layer<s>.0.relu" instead: a
// layer split by the cut); the last stage also owns a final root-level node.
inline OpGraph SampleGraph(int stages) {
  OpGraph g;
  auto value = [&](int producer, const std::string& name, int64_t bytes) {
    OpValue v;
    v.id = int(g.values.size());
    v.name = name;
    v.type = "Tensor";
    v.dtype = "float32";
    v.bytes = bytes;
    v.producer = producer;
    g.values.push_back(v);
    return v.id;
  };
  auto node = [&](const std::string& kind, const std::string& layer, std::vector<int> inputs) {
    OpNode n;
    n.id = int(g.nodes.size());
    n.kind = kind;
    n.layer = layer;
    n.inputs = inputs;
    for (int v : inputs) g.values[v].consumers.push_back(n.id);
    g.nodes.push_back(n);
    const int out = value(n.id, "x" + std::to_string(n.id), 32 * 64 * 56 * 56 * 4);
    g.nodes.back().outputs.push_back(out);
    return out;
  };
  const int input = value(-1, "input", 32 * 3 * 224 * 224 * 4);
  g.inputs.push_back(input);
  const int constant = node("prim::Constant", "", {});
  g.values[constant].rematerializable = true;
  g.values[constant].type = "int";
  g.values[constant].bytes = 0;
  int x = input;
  int skip = -1;
  for (int s = 0; s < stages; ++s) {
    const std::string layer = "layer" + std::to_string(s + 1) + ".0.";
    const std::string first = s == 0 ? layer + "conv1" : "layer" + std::to_string(s) + ".0.relu";
    x = node("aten::conv2d", first, s == 0 ? std::vector<int>{x, constant} : std::vector<int>{x});
    if (s == 0) skip = x;
    x = node("aten::add", layer + "conv1", s == 2 ? std::vector<int>{x, skip} : std::vector<int>{x});
    x = node("aten::relu", layer + "relu", {x});
  }
  x = node("aten::flatten", "", {x, constant});
  g.values[x].is_graph_output = true;
  g.outputs.push_back(x);
  return g;
}

inline Plan SamplePlan(int stages = 3, int microbatches = 4, ScheduleKind kind = ScheduleKind::kOneFOneB) {
  const bool training = IsTraining(kind);
  const OpGraph graph = SampleGraph(stages);
  Plan plan;
  plan.model = {"models/sample_resnet.pt", "ab12", "cd34", int(graph.nodes.size())};
  plan.training = training;
  plan.microbatches = microbatches;
  plan.microbatch_size = 4;
  plan.batch = int64_t(microbatches) * plan.microbatch_size;
  plan.schedule = kind;
  const Schedule schedule = BuildSchedule(kind, stages, microbatches);
  for (int s = 0; s < stages; ++s) {
    plan.devices.push_back({s, "cuda", s, "A100-80GB", 80 * kGiB, 1.0});
    if (s + 1 < stages) plan.links.push_back({25e9, 0.01});
    PlanStage st;
    st.id = s;
    st.device = s;
    st.nodes = {{1 + 3 * s, 3 + 3 * s}};
    if (s == 0) st.nodes = {{0, 3}};
    if (s == stages - 1) st.nodes.back().second += 1;
    st.layers = {s == 0 ? "conv1" : "layer" + std::to_string(s) + ".0", "layer" + std::to_string(s + 1) + ".0"};
    st.param_count = 1'200'000 + 500'000 * int64_t(s);
    st.param_bytes = 4 * st.param_count;
    if (s + 1 < stages) {
      const int value_id = graph.nodes[3 + 3 * s].outputs[0];
      st.sends.push_back({"x" + std::to_string(3 + 3 * s),
                          value_id,
                          s + 1,
                          "float32",
                          {4, 64, 56, 56},
                          4 * 64 * 56 * 56 * 4,
                          training});
      if (s < 2 && stages > 2) {  // the skip connection, relayed through stage 1
        st.sends.push_back(
            {"x1", graph.nodes[1].outputs[0], s + 1, "float32", {4, 64, 56, 56}, 4 * 64 * 56 * 56 * 4, training});
      }
      st.send_ms = s < 2 && stages > 2 ? 3 : 1.5;
    }
    if (s > 0) st.send_gradients_ms = training ? plan.stages[s - 1].send_ms : 0;
    st.forward_ms = 10.0 + 2.5 * s;
    st.backward_ms = training ? 2 * st.forward_ms : 0;
    st.static_bytes = (training ? 4 : 1) * st.param_bytes;
    st.gradient_bytes = training ? st.param_bytes : 0;
    st.activation_bytes = 3 * 4 * 64 * 56 * 56 * 4;
    st.program = s;
    plan.stages.push_back(st);
    plan.programs.push_back({st.device, schedule.actions[s]});
  }
  const SimResult sim = SimulatePlan(plan);
  double one_device = 0;
  for (PlanStage& st : plan.stages) {
    st.busy_fraction = sim.busy_ms[st.id] / sim.step_ms;
    st.peak_memory_bytes = sim.peak_memory_bytes[st.id];
    one_device += (st.forward_ms + st.backward_ms) * microbatches;
  }
  PlanPrediction& p = plan.predicted;
  p.step_ms = sim.step_ms;
  p.bottleneck_ms = plan.stages.back().forward_ms + plan.stages.back().backward_ms + 3;
  p.bubble_fraction = sim.bubble_fraction;
  p.samples_per_s = 1000.0 * double(plan.batch) / sim.step_ms;
  p.one_device_step_ms = one_device * 0.9;  // one big micro-batch runs a little faster per sample
  p.speedup_vs_one_device = p.one_device_step_ms / p.step_ms;
  p.device_peak_memory_bytes = sim.device_peak_memory_bytes;
  plan.profile = {"measured", "cuda:0", "", 8, {1, 2, 4, 8}, 0.972, 0.951, "", {}};

  auto alt = [&](int k, int m, ScheduleKind sk, double step, bool feasible, bool simulated, std::string why = "") {
    PlanCandidate a;
    a.stages = k;
    a.microbatches = m;
    a.microbatch_size = (plan.batch + m - 1) / m;
    a.schedule = sk;
    a.feasible = feasible;
    a.simulated = simulated;
    a.why_not = why;
    a.step_ms = step;
    a.bubble_fraction = simulated ? sim.bubble_fraction * step / sim.step_ms : 0;
    a.bottleneck_ms = step / (m + k - 1);
    a.peak_memory_bytes = feasible ? (3 + k) * kGiB : 90 * kGiB;
    plan.alternatives.push_back(a);
  };
  const ScheduleKind other = training ? ScheduleKind::kGPipe : kind;
  alt(stages, microbatches, kind, sim.step_ms, true, true);  // the chosen one
  alt(2, microbatches * 2, kind, sim.step_ms * 1.031, true, true);
  alt(stages, microbatches, other, sim.step_ms * (training ? 1.08 : 1.0), true, training);
  alt(1, 1, kind, sim.step_ms * 2.7, true, false);  // only its lower bound
  alt(2, 1, kind, 0, false, false, "dp: stage 0 needs 90 GiB; device 0 has 80 GiB");
  if (!training) plan.alternatives.erase(plan.alternatives.begin() + 2);  // no second schedule

  auto cmp = [&](const std::string& method, const std::string& split, double ratio, std::string why = "") {
    PlanCandidate c;
    c.method = method;
    c.split = split;
    c.stages = stages;
    c.microbatches = microbatches;
    c.microbatch_size = plan.microbatch_size;
    c.schedule = kind;
    c.feasible = why.empty();
    c.why_not = why;
    c.step_ms = sim.step_ms * ratio;
    c.bottleneck_ms = p.bottleneck_ms * ratio;
    c.bubble_fraction = sim.bubble_fraction;
    plan.comparisons.push_back(c);
  };
  cmp("dp", "", 1.0);
  cmp("uniform", "", 1.23);
  cmp("params", "", 1.41);
  cmp("block", "", 0, "block: stage 1 needs 95 GiB; device 1 has 80 GiB");
  cmp("layers", "layer1 | layer2,layer3", 1.12);

  plan.warnings = {"profile coverage 97.2% of the whole-graph time: small ops are not timed",
                   "stage 2 is 25% slower than stage 0; the DP could not balance layer3 further"};
  return plan;
}

}  // namespace mp::testing
