// Device profiles load and validate; the roofline and its calibration.
#include <doctest/doctest.h>

#include "common/error.h"
#include "planner/profile/analytic.h"
#include "planner/profile/device_profile.h"

namespace {

// Two nodes: a float32 linear (compute-heavy) and a relu (memory-heavy),
// one size, as a shapes pass would leave them.
struct Tiny {
  mp::OpGraph graph;
  mp::Profile shapes;
};

Tiny MakeTiny() {
  Tiny t;
  auto value = [&](int producer, std::string dtype, bool param) {
    mp::OpValue v;
    v.id = static_cast<int>(t.graph.values.size());
    v.dtype = std::move(dtype);
    v.type = "Tensor";
    v.producer = producer;
    v.is_param = param;
    t.graph.values.push_back(v);
    return v.id;
  };
  const int x = value(-1, "float32", false);
  const int w = value(-1, "float32", true);
  t.graph.inputs = {x};
  t.graph.params = {w};
  const int h = value(0, "float32", false);
  const int y = value(1, "float32", false);
  t.graph.nodes.push_back({0, "aten::linear", "fc", {x, w}, {h}, false, false});
  t.graph.nodes.push_back({1, "aten::relu", "", {h}, {y}, false, false});
  t.shapes.training = true;
  t.shapes.batch = 64;
  t.shapes.microbatch_sizes = {64};
  for (int i = 0; i < 2; ++i) {
    mp::NodeCost n;
    n.id = i;
    n.kind = t.graph.nodes[i].kind;
    n.flops = {i == 0 ? 2e12 : 1e9};
    n.bytes_moved = {i == 0 ? 1e8 : 4e11};
    n.forward_ms = {0};
    n.backward_ms = {0};
    n.spread = {0};
    t.shapes.nodes.push_back(n);
  }
  return t;
}

}  // namespace

TEST_CASE("every bundled device profile loads") {
  const auto names = mp::BundledProfiles();
  for (const char* want : {"generic-cpu", "v100", "a100-40gb", "a100-80gb", "h100-sxm", "h200", "rtx4090", "t4"})
    CHECK(std::find(names.begin(), names.end(), want) != names.end());
  for (const auto& name : names) {
    const auto d = mp::LoadDeviceProfile(name);
    CHECK(d.fp32_flops > 0);
    CHECK(d.memory_bandwidth > 0);
    CHECK(d.memory_bytes > 0);
    CHECK(d.BestLinkBandwidth() > 0);
  }
  const auto a100 = mp::LoadDeviceProfile("A100-80GB");  // names match in any case
  CHECK(a100.name == "A100-80GB");
  CHECK(a100.tf32_flops == doctest::Approx(156e12));
  CHECK(a100.BestLinkBandwidth() == doctest::Approx(300e9));
}

TEST_CASE("unknown and malformed device profiles are refused by name") {
  CHECK_THROWS_WITH_AS(mp::LoadDeviceProfile("tpu-v9"), doctest::Contains("unknown device profile 'tpu-v9' (known: "),
                       mp::InputError);
  const std::string good =
      "name: X\ntype: cuda\nmemory_bytes: 1e9\npeak_flops: {fp32: 1e12, tf32: 0, fp16: 0, bf16: 0}\n"
      "memory_bandwidth: 1e11\nlinks: {pcie: 1e10}\nlink_latency_us: 5\n"
      "efficiency: {compute: 0.5, memory: 0.5}\nlaunch_overhead_us: 5\n";
  CHECK(mp::ParseDeviceProfile(good, "x.yaml").name == "X");
  CHECK_THROWS_WITH_AS(mp::ParseDeviceProfile(good + "clock_ghz: 2\n", "x.yaml"), "x.yaml: clock_ghz: unknown key (expected one of name, type, memory_bytes, "
                       "peak_flops, memory_bandwidth, links, link_latency_us, efficiency, launch_overhead_us)",
                       mp::InputError);
  std::string no_bw = good;
  no_bw.replace(no_bw.find("memory_bandwidth: 1e11\n"), 23, "");
  CHECK_THROWS_WITH_AS(mp::ParseDeviceProfile(no_bw, "x.yaml"), "x.yaml: top level: missing key 'memory_bandwidth'",
                       mp::InputError);
  std::string word = good;
  word.replace(word.find("memory_bandwidth: 1e11"), 22, "memory_bandwidth: fast");
  CHECK_THROWS_WITH_AS(mp::ParseDeviceProfile(word, "x.yaml"), "x.yaml: memory_bandwidth: expected a number, found 'fast'",
                       mp::InputError);
  CHECK_THROWS_WITH_AS(mp::ParseDeviceProfile(good + "type: cpu\n", "x.yaml"), "x.yaml: type: duplicate key",
                       mp::InputError);
  std::string bad_eff = good;
  bad_eff.replace(bad_eff.find("compute: 0.5"), 12, "compute: 1.5");
  CHECK_THROWS_WITH_AS(mp::ParseDeviceProfile(bad_eff, "x.yaml"), "x.yaml: efficiency.compute: expected a number > 0 and <= 1, found 1.5",
                       mp::InputError);
}

TEST_CASE("precision follows PyTorch's defaults") {
  const auto a100 = mp::LoadDeviceProfile("a100-80gb");
  CHECK(mp::PeakFlopsFor(a100, "aten::conv2d", "float32") == doctest::Approx(156e12));  // TF32 convs
  CHECK(mp::PeakFlopsFor(a100, "aten::linear", "float32") == doctest::Approx(19.5e12));  // FP32 matmuls
  CHECK(mp::PeakFlopsFor(a100, "aten::linear", "bfloat16") == doctest::Approx(312e12));
  const auto v100 = mp::LoadDeviceProfile("v100");
  CHECK(mp::PeakFlopsFor(v100, "aten::conv2d", "float32") == doctest::Approx(15.7e12));  // no TF32
  CHECK(mp::PeakFlopsFor(v100, "aten::linear", "bfloat16") == doctest::Approx(15.7e12));  // no BF16
}

TEST_CASE("the roofline: max of compute and memory time plus launch") {
  const Tiny t = MakeTiny();
  const auto a100 = mp::LoadDeviceProfile("a100-80gb");
  const mp::Profile p = mp::AnalyticProfile(t.shapes, t.graph, a100);
  CHECK(p.source == "analytic");
  CHECK(p.device == "A100-80GB");
  const double launch_ms = a100.launch_overhead_us / 1000;
  // linear: 2e12 FLOP at 19.5e12 * 0.7 (compute-bound).
  CHECK(p.nodes[0].forward_ms[0] == doctest::Approx(launch_ms + 1000 * 2e12 / (19.5e12 * 0.7)));
  CHECK(p.nodes[0].backward_ms[0] == doctest::Approx(launch_ms + 1000 * 4e12 / (19.5e12 * 0.7)));
  // relu: 4e11 bytes at 2039e9 * 0.8 (memory-bound).
  CHECK(p.nodes[1].forward_ms[0] == doctest::Approx(launch_ms + 1000 * 4e11 / (2039e9 * 0.8)));
}

TEST_CASE("frozen weights: the input's gradient only where one passes, no backward where none reaches") {
  const auto a100 = mp::LoadDeviceProfile("a100-80gb");
  const double launch_ms = a100.launch_overhead_us / 1000;
  // A frozen backbone: the linear's weight frozen, its input a model input.
  Tiny t = MakeTiny();
  t.graph.values[t.graph.params[0]].frozen = true;
  const mp::Profile frozen = mp::AnalyticProfile(t.shapes, t.graph, a100);
  CHECK(frozen.nodes[0].backward_ms[0] == 0);
  CHECK(frozen.nodes[1].backward_ms[0] == 0);
  // LoRA: a trained adapter (x times a trained parameter a), then the
  // frozen linear on what it made: a gradient passes through the linear to
  // the adapter, one product back, the input's, and no W.
  mp::OpGraph g;
  for (int id = 0; id < 5; ++id) {
    mp::OpValue v;
    v.id = id;
    v.dtype = "float32";
    v.type = "Tensor";
    v.producer = id == 3 ? 0 : id == 4 ? 1 : -1;
    v.is_param = id == 1 || id == 2;
    v.frozen = id == 1;
    g.values.push_back(v);
  }
  g.inputs = {0};
  g.params = {1, 2};
  g.nodes.push_back({0, "aten::mul", "adapter", {0, 2}, {3}, false, false});
  g.nodes.push_back({1, "aten::linear", "base", {1, 3}, {4}, false, false});
  mp::Profile shapes = t.shapes;
  std::swap(shapes.nodes[0], shapes.nodes[1]);  // the adapter costs the relu's, the linear its own
  for (int i = 0; i < 2; ++i) shapes.nodes[i].id = i, shapes.nodes[i].kind = g.nodes[i].kind;
  const mp::Profile lora = mp::AnalyticProfile(shapes, g, a100);
  CHECK(lora.nodes[1].backward_ms[0] == doctest::Approx(launch_ms + 1000 * 2e12 / (19.5e12 * 0.7)));
  CHECK(lora.nodes[1].input_backward_ms == lora.nodes[1].backward_ms);
  CHECK(lora.nodes[1].weight_backward_ms == std::vector<double>{0});
  CHECK(lora.nodes[0].backward_ms[0] == doctest::Approx(launch_ms + 1000 * 8e11 / (2039e9 * 0.8)));
}

TEST_CASE("calibration recovers the efficiencies a measurement shows") {
  Tiny t = MakeTiny();
  auto cpu = mp::LoadDeviceProfile("generic-cpu");
  // Pretend the device ran at 25% of peak compute and 40% of peak bandwidth.
  mp::Profile measured = t.shapes;
  measured.nodes[0].forward_ms = {1000 * 2e12 / (cpu.fp32_flops * 0.25)};
  measured.nodes[1].forward_ms = {1000 * 4e11 / (cpu.memory_bandwidth * 0.40)};
  const auto fitted = mp::CalibrateDevice(cpu, measured, t.graph);
  CHECK(fitted.compute_efficiency == doctest::Approx(0.25));
  CHECK(fitted.memory_efficiency == doctest::Approx(0.40));
  const mp::Profile again = mp::AnalyticProfile(t.shapes, t.graph, fitted);
  CHECK(again.nodes[0].forward_ms[0] ==
        doctest::Approx(measured.nodes[0].forward_ms[0] + fitted.launch_overhead_us / 1000));
}
