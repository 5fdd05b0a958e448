// OpGraph: the plain view, its byte sizes and its Boost.Graph algorithms.
#include "tests/doctest_torch.h"

#include "common/error.h"
#include "planner/graph/build_op_graph.h"
#include "planner/graph/model_file.h"
#include "planner/graph/resolve_inputs.h"
#include "planner/graph/scaled_shapes.h"
#include "zoo.h"

namespace {

struct Loaded {
  mp::ModelFile model;
  mp::CanonicalGraph canonical;
  mp::OpGraph graph;
};

Loaded Load(const std::string& file) {
  Loaded l{mp::LoadModelFile(mp::test::ZooPath(file)), {}, {}};
  l.canonical = mp::Canonicalize(l.model.module);
  l.graph = mp::BuildOpGraph(l.canonical);
  return l;
}

}  // namespace

TEST_CASE("toy: values, producers and consumers") {
  auto l = Load("toy.script.pt");
  const auto& g = l.graph;
  CHECK(g.inputs.size() == 1);
  CHECK(g.params.size() == 4);
  CHECK(g.values[g.params[0]].name == "net1.weight");
  CHECK(g.values[g.params[0]].is_param);
  REQUIRE(g.outputs.size() == 1);
  const auto& out = g.values[g.outputs[0]];
  CHECK(out.is_graph_output);
  CHECK(g.nodes[out.producer].kind == "aten::linear");
  CHECK(g.nodes[out.producer].layer == "net2");
  // Every edge is recorded on both ends.
  for (const auto& node : g.nodes) {
    for (int v : node.inputs) {
      const auto& c = g.values[v].consumers;
      CHECK(std::find(c.begin(), c.end(), node.id) != c.end());
    }
    for (int v : node.outputs) CHECK(g.values[v].producer == node.id);
  }
}

TEST_CASE("ResNet-50: byte sizes after the shape probe") {
  auto l = Load("resnet50.script.pt");
  auto spec = l.model.input_spec;
  spec[0].shape[0] = 4;
  mp::FillShapes(l.canonical, mp::SyntheticInputs(spec), l.graph);
  CHECK(l.graph.has_shapes);
  // The stem conv: 4 x 64 x 64 x 64 float32.
  for (const auto& node : l.graph.nodes) {
    if (node.layer == "conv1" && node.kind == "aten::conv2d") {
      const auto& v = l.graph.values[node.outputs[0]];
      CHECK((v.shape == std::vector<int64_t>{4, 64, 64, 64}));
      CHECK(v.dtype == "float32");
      CHECK(v.bytes == 4LL * 64 * 64 * 64 * 4);
    }
  }
  const auto& out = l.graph.values[l.graph.outputs[0]];
  CHECK((out.shape == std::vector<int64_t>{4, 1000}));
  CHECK(l.graph.values[l.graph.params[0]].bytes == 64 * 3 * 7 * 7 * 4);
  int64_t param_bytes = 0;
  for (int p : l.graph.params) param_bytes += l.graph.values[p].bytes;
  CHECK(param_bytes > 100'000'000);  // 25.6M float32 parameters and buffers
}

TEST_CASE("a shape the model rejects is an InputError with the op's message") {
  auto l = Load("convnet.script.pt");
  mp::TensorSpec wrong{"x", "float32", {2, 3, 16, 16}};
  CHECK_THROWS_WITH_AS(mp::FillShapes(l.canonical, mp::SyntheticInputs({wrong}), l.graph),
                       doctest::Contains("the model rejects these inputs"), mp::InputError);
}

TEST_CASE("Boost.Graph: topological order and reachability agree with the edges") {
  auto l = Load("branchy.script.pt");
  const auto& g = l.graph;
  auto order = mp::TopologicalOrder(g);
  REQUIRE(order.size() == g.nodes.size());
  std::vector<int> position(order.size());
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = static_cast<int>(i);
  auto reach = mp::Reachability(g);
  for (const auto& v : g.values) {
    if (v.producer < 0) continue;
    for (int c : v.consumers) {
      CHECK(position[v.producer] < position[c]);
      CHECK(reach[v.producer][c]);
    }
  }
  // The stem feeds the head through the long skip connection and the U.
  const int first_conv = [&] {
    for (const auto& n : g.nodes) if (n.layer == "stem") return n.id;
    return -1;
  }();
  const int head = g.values[g.outputs[0]].producer;
  REQUIRE(first_conv >= 0);
  CHECK(reach[first_conv][head]);
  CHECK_FALSE(reach[head][first_conv]);
}

TEST_CASE("frozen parameters: no gradient reaches what only they and the inputs make, and nothing is kept there") {
  SUBCASE("a frozen feature extractor, a new classifier") {  // PyTorch's fine-tuning tutorial
    auto l = Load("heldout/finetune.script.pt");
    const auto& g = l.graph;
    std::vector<std::string> trained;
    for (int p : g.params) {
      if (!g.values[p].frozen) trained.push_back(g.values[p].name);
    }
    CHECK((trained == std::vector<std::string>{"classifier.1.weight", "classifier.1.bias"}));
    int features = 0;
    for (const auto& node : g.nodes) {
      CAPTURE(node.layer);
      CAPTURE(node.kind);
      const bool in_features = node.layer.rfind("features", 0) == 0;
      features += in_features ? 1 : 0;
      for (int out : node.outputs) {
        if (in_features) {
          CHECK(g.values[out].gradient_free);
          CHECK_FALSE(g.values[out].kept_for_backward);  // autograd records nothing there
        }
        if (node.layer == "classifier.0" && node.kind == "aten::dropout") {  // before the new layer
          CHECK(g.values[out].gradient_free);
          CHECK(g.values[out].kept_for_backward);  // the new convolution's input, for its weight's gradient
        }
        if (node.layer == "classifier.1" && node.kind == "aten::conv2d") CHECK_FALSE(g.values[out].gradient_free);
      }
    }
    CHECK(features > 30);
  }
  SUBCASE("LoRA: frozen weights, trained adapters inside every block") {
    auto l = Load("heldout/lora_gpt.script.pt");
    const auto& g = l.graph;
    int trained = 0;
    for (int p : g.params) {
      const bool lora = g.values[p].name.find("lora_") != std::string::npos;
      CHECK(g.values[p].frozen != lora);
      trained += lora ? 1 : 0;
    }
    CHECK(trained == 16);  // A and B of q and v in 4 blocks
    for (const auto& node : g.nodes) {
      CAPTURE(node.layer);
      CAPTURE(node.kind);
      for (int out : node.outputs) {
        // The embeddings and the first block's norm read frozen weights and the ids only.
        if (node.layer == "tok" || node.layer == "pos" || node.layer == "blocks.0.ln1") {
          CHECK(g.values[out].gradient_free);
        }
        // The first adapter makes gradients flow; so does all that follows the first block.
        if (node.layer == "blocks.0.q.lora_b" || node.layer == "head") CHECK_FALSE(g.values[out].gradient_free);
      }
    }
  }
  SUBCASE("a model with no frozen parameter: every layer's output takes a gradient") {
    auto l = Load("mlp.script.pt");
    for (int p : l.graph.params) CHECK_FALSE(l.graph.values[p].frozen);
    int layers = 0;
    for (const auto& node : l.graph.nodes) {
      if (node.kind != "aten::linear" && node.kind != "aten::relu") continue;
      ++layers;
      for (int out : node.outputs) CHECK_FALSE(l.graph.values[out].gradient_free);
    }
    CHECK(layers == 32);
  }
}

TEST_CASE("mutating nodes are marked") {
  auto l = Load("inplace.script.pt");
  int mutating = 0;
  for (const auto& n : l.graph.nodes) mutating += n.mutates;
  CHECK(mutating == 2);  // relu_ and add_
}

TEST_CASE("shapes scaled from batch 1 and 2 equal a full-batch pass on every zoo model") {
  for (const std::string& file : mp::test::ZooFiles()) {
    CAPTURE(file);
    Loaded l = Load(file);
    const std::vector<mp::TensorSpec> spec = mp::test::SmallResNetSpecs(file, mp::WithBatch(mp::ResolveInputs(l.model, l.canonical, {}), 12));
    mp::OpGraph scaled = l.graph, full = l.graph;
    mp::FillShapesForBatch(l.canonical, spec, scaled);
    mp::FillShapes(l.canonical, mp::SyntheticInputs(spec), full);
    REQUIRE(scaled.values.size() == full.values.size());
    for (size_t v = 0; v < full.values.size(); ++v) {
      CAPTURE(full.values[v].name);
      CHECK(scaled.values[v].shape == full.values[v].shape);
      CHECK(scaled.values[v].bytes == full.values[v].bytes);
      CHECK(scaled.values[v].dtype == full.values[v].dtype);
    }
  }
}

TEST_CASE("integer inputs that feed an embedding draw indices inside its table") {
  Loaded l = Load("gpt.script.pt");
  l.model.input_spec.clear();  // as for a model exported without a spec
  const std::vector<mp::TensorSpec> specs = mp::ResolveInputs(l.model, l.canonical, {"int64[4,16]"});
  REQUIRE(specs.size() == 1);
  CHECK(specs[0].has_range);
  CHECK(specs[0].low == 0);
  CHECK(specs[0].high == 1024);  // the token table's rows, not the default [0, 2)
  // Floating inputs get no range.
  Loaded r = Load("mlp.script.pt");
  r.model.input_spec.clear();
  CHECK_FALSE(mp::ResolveInputs(r.model, r.canonical, {"float32[4,512]"})[0].has_range);
}
