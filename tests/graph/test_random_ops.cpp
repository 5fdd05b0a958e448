// SeedRandomOps and RngScope: every random op gets its own generator, the
// global one is never drawn from, what is drawn is a function of the key,
// and the mp:: twins compute what ATen computes from the same generator.
#include "tests/doctest_torch.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/jit/ir/irparser.h>

#include "common/error.h"
#include "planner/graph/rng_scope.h"
#include "planner/graph/run_graph.h"
#include "planner/graph/seed_random_ops.h"
#include "planner/graph/split_rnn_layers.h"

namespace {

// Dropout in training and in eval, a feature alpha dropout, randn_like (no
// generator overload), rand (one without a generator that has a twin
// overload with one), bernoulli (takes a generator) and rand_like in a loop.
const char* kGraph = R"IR(
graph(%x : Tensor, %n : int):
  %p : float = prim::Constant[value=0.5]()
  %t : bool = prim::Constant[value=1]()
  %f : bool = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %none : NoneType = prim::Constant()
  %a : Tensor = aten::dropout(%x, %p, %t)
  %b : Tensor = aten::dropout(%a, %p, %f)
  %c : Tensor = aten::feature_alpha_dropout(%b, %p, %t)
  %d : Tensor = aten::randn_like(%c, %none, %none, %none, %none, %none)
  %size : int[] = aten::size(%x)
  %e : Tensor = aten::rand(%size, %none, %none, %none, %none)
  %s : Tensor = aten::add(%d, %e, %one)
  %g : Tensor = aten::bernoulli(%x, %p, %none)
  %l : Tensor = prim::Loop(%n, %t, %x)
    block0(%i : int, %acc : Tensor):
      %r : Tensor = aten::rand_like(%acc, %none, %none, %none, %none, %none)
      %next : Tensor = aten::add(%acc, %r, %one)
      -> (%t, %next)
  return (%c, %s, %g, %l)
)IR";

std::shared_ptr<torch::jit::Graph> Seeded(int* count = nullptr) {
  auto graph = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(kGraph, graph.get());
  const int n = mp::SeedRandomOps(*graph);
  if (count) *count = n;
  return graph;
}

std::vector<at::Tensor> Run(const mp::GraphRunner& runner, const at::Tensor& x, int64_t iterations) {
  std::vector<at::Tensor> out;
  for (const auto& v : runner.Run({x, iterations})) out.push_back(v.toTensor());
  return out;
}

bool Same(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (!at::equal(a[i], b[i])) return false;
  }
  return true;
}

int Count(const torch::jit::Block* block, const std::string& kind) {
  int n = 0;
  for (const auto* node : block->nodes()) {
    n += node->kind().toQualString() == kind;
    for (const auto* inner : node->blocks()) n += Count(inner, kind);
  }
  return n;
}

}  // namespace

TEST_CASE("every random op takes a generator of its own, dropout in eval is left alone") {
  int count = 0;
  const auto graph = Seeded(&count);
  CHECK(count == 6);
  const auto* block = graph->block();
  CHECK(Count(block, "mp::generator") == 6);
  CHECK(Count(block, "mp::dropout") == 1);
  CHECK(Count(block, "aten::dropout") == 1);  // train = false: draws nothing
  CHECK(Count(block, "mp::feature_alpha_dropout") == 1);
  // The twins in LibTorch 1.13; 2.x has overloads that take a generator.
  CHECK(Count(block, "mp::randn_like") + Count(block, "aten::randn_like") == 1);
  CHECK(Count(block, "mp::rand_like") + Count(block, "aten::rand_like") == 1);  // inside the loop
  CHECK(Count(block, "aten::rand") == 1);
  const auto seeded = [](const torch::jit::Node* node) {
    for (const auto* input : node->inputs()) {
      if (input->node()->kind().toQualString() == std::string("mp::generator")) return true;
    }
    return false;
  };
  for (const auto* node : block->nodes()) {
    if (node->kind() == c10::aten::randn_like || node->kind() == c10::aten::rand_like) CHECK(seeded(node));
    if (node->kind() == c10::aten::rand) CHECK(node->schema().overload_name() == "generator");
    if (node->kind() == c10::aten::bernoulli) CHECK(node->inputs().back()->node()->kind().toQualString() == std::string("mp::generator"));
  }
}

TEST_CASE("what the ops draw is a function of the key, never of the global generator") {
  const mp::GraphRunner runner(Seeded());
  const at::Tensor x = at::rand({4, 3, 5}, at::detail::createCPUGenerator(1));
  at::Generator global = at::detail::getDefaultCPUGenerator();
  const at::Tensor before = global.get_state();

  std::vector<at::Tensor> first, again, other_mb, other_step, other_seed;
  {
    const mp::RngScope scope({7, 2, 3});
    first = Run(runner, x, 2);
  }
  {
    const mp::RngScope scope({7, 2, 3});
    again = Run(runner, x, 2);
  }
  {
    const mp::RngScope scope({7, 2, 4});
    other_mb = Run(runner, x, 2);
  }
  {
    const mp::RngScope scope({7, 3, 3});
    other_step = Run(runner, x, 2);
  }
  {
    const mp::RngScope scope({8, 2, 3});
    other_seed = Run(runner, x, 2);
  }
  CHECK(at::equal(global.get_state(), before));
  CHECK(Same(first, again));
  for (const auto* other : {&other_mb, &other_step, &other_seed}) {
    for (size_t i = 0; i < first.size(); ++i) CHECK_FALSE(at::equal(first[i], (*other)[i]));
  }
  // bernoulli(x, 0.5) draws ones about half the time.
  const double ones = first[2].mean().item<double>();
  CHECK(ones > 0.3);
  CHECK(ones < 0.7);
}

TEST_CASE("an op in a loop draws anew each iteration, and a scope counts its own calls") {
  const mp::GraphRunner runner(Seeded());
  const at::Tensor x = at::zeros({2, 3});
  at::Tensor one, two;
  {
    const mp::RngScope scope({0, 0, 0});
    one = Run(runner, x, 1).back();
  }
  {
    const mp::RngScope outer({0, 0, 0});
    {
      const mp::RngScope inner({5, 5, 5});  // a nested scope leaves the outer's counts alone
      Run(runner, x, 1);
    }
    two = Run(runner, x, 2).back();
  }
  const at::Tensor second_draw = two - one;  // x = 0: one is the first draw
  CHECK_FALSE(at::allclose(second_draw, one));
  CHECK(second_draw.min().item<double>() >= 0);
  CHECK(second_draw.max().item<double>() < 1);
}

TEST_CASE("the mp:: twins compute what ATen computes from the same generator") {
  const at::Tensor x = at::randn({3, 4, 5, 2}, at::detail::createCPUGenerator(3));
  const uint64_t seed = 42;
  using Dropout = at::Tensor(const at::Tensor&, double, bool, c10::optional<at::Generator>);
  const std::vector<std::pair<const char*, at::Tensor (*)(const at::Tensor&, double, bool)>> dropouts = {
      {"mp::dropout", &at::dropout},
      {"mp::feature_dropout", &at::feature_dropout},
      {"mp::alpha_dropout", &at::alpha_dropout},
      {"mp::feature_alpha_dropout", &at::feature_alpha_dropout}};
  for (const auto& dropout : dropouts) {
    const auto& name = dropout.first;
    const auto& aten = dropout.second;
    CAPTURE(name);
    at::manual_seed(seed);
    const at::Tensor want = aten(x, 0.3, true);
    const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Dropout>();
    CHECK(at::equal(op.call(x, 0.3, true, at::detail::createCPUGenerator(seed)), want));
    CHECK(at::equal(op.call(x, 0.3, false, at::detail::createCPUGenerator(seed)), x));
  }
  at::manual_seed(seed);
  const at::Tensor want = at::randn_like(x);
  using Like = at::Tensor(const at::Tensor&, c10::optional<at::ScalarType>, c10::optional<at::Layout>,
                          c10::optional<at::Device>, c10::optional<bool>, c10::optional<at::MemoryFormat>,
                          c10::optional<at::Generator>);
  const auto randn_like = c10::Dispatcher::singleton().findSchemaOrThrow("mp::randn_like", "").typed<Like>();
  CHECK(at::equal(randn_like.call(x, {}, {}, {}, {}, {}, at::detail::createCPUGenerator(seed)), want));
}

TEST_CASE("randperm without a generator takes the overload with one") {
  auto graph = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(R"IR(
graph(%n : int):
  %none : NoneType = prim::Constant()
  %p : Tensor = aten::randperm(%n, %none, %none, %none, %none)
  return (%p)
)IR", graph.get());
  CHECK(mp::SeedRandomOps(*graph) == 1);
  const mp::GraphRunner runner(graph);
  at::Tensor a, b;
  {
    const mp::RngScope scope({1, 0, 0});
    a = runner.Run({int64_t(50)})[0].toTensor();
  }
  {
    const mp::RngScope scope({1, 0, 0});
    b = runner.Run({int64_t(50)})[0].toTensor();
  }
  CHECK(at::equal(a, b));
  CHECK(at::equal(std::get<0>(a.sort()), at::arange(50)));
}

namespace {

// A 2-layer bidirectional LSTM (initial states in a list) and a 3-layer GRU
// without biases (its state a tensor), both with dropout %p in training.
const char* kRecurrent = R"IR(
graph(%x : Tensor, %h : Tensor, %c : Tensor, %g : Tensor, %p : float,
      %a0 : Tensor, %a1 : Tensor, %a2 : Tensor, %a3 : Tensor, %a4 : Tensor, %a5 : Tensor, %a6 : Tensor, %a7 : Tensor,
      %a8 : Tensor, %a9 : Tensor, %a10 : Tensor, %a11 : Tensor, %a12 : Tensor, %a13 : Tensor, %a14 : Tensor,
      %a15 : Tensor, %b0 : Tensor, %b1 : Tensor, %b2 : Tensor, %b3 : Tensor, %b4 : Tensor, %b5 : Tensor):
  %t : bool = prim::Constant[value=1]()
  %f : bool = prim::Constant[value=0]()
  %two : int = prim::Constant[value=2]()
  %three : int = prim::Constant[value=3]()
  %hx : Tensor[] = prim::ListConstruct(%h, %c)
  %aw : Tensor[] = prim::ListConstruct(%a0, %a1, %a2, %a3, %a4, %a5, %a6, %a7,
                                       %a8, %a9, %a10, %a11, %a12, %a13, %a14, %a15)
  %y : Tensor, %hy : Tensor, %cy : Tensor = aten::lstm(%x, %hx, %aw, %t, %two, %p, %t, %t, %f)
  %bw : Tensor[] = prim::ListConstruct(%b0, %b1, %b2, %b3, %b4, %b5)
  %z : Tensor, %gy : Tensor = aten::gru(%y, %g, %bw, %f, %three, %p, %t, %f, %f)
  return (%y, %hy, %cy, %z, %gy)
)IR";

std::vector<c10::IValue> RecurrentInputs(double p) {
  at::manual_seed(3);
  const int64_t T = 5, B = 2, I = 3, H = 4;
  std::vector<c10::IValue> in = {at::randn({T, B, I}), at::randn({4, B, H}), at::randn({4, B, H}), at::randn({3, B, H}),
                                 p};
  for (int64_t layer = 0; layer < 2; ++layer) {  // LSTM: per layer, per direction w_ih, w_hh, b_ih, b_hh
    for (int d = 0; d < 2; ++d) {
      const std::vector<std::vector<int64_t>> shapes = {{4 * H, layer == 0 ? I : 2 * H}, {4 * H, H}, {4 * H}, {4 * H}};
      for (const auto& shape : shapes) {
        in.push_back(at::randn(shape) * 0.5);
      }
    }
  }
  for (int64_t layer = 0; layer < 3; ++layer) {  // GRU: w_ih, w_hh
    in.push_back(at::randn({3 * H, layer == 0 ? 2 * H : H}) * 0.5);
    in.push_back(at::randn({3 * H, H}) * 0.5);
  }
  return in;
}

std::vector<at::Tensor> Tensors(const std::vector<c10::IValue>& values) {
  std::vector<at::Tensor> out;
  for (const auto& v : values) out.push_back(v.toTensor());
  return out;
}

}  // namespace

TEST_CASE("a multi-layer LSTM or GRU with dropout runs a call per layer: masks of its own, the same values without") {
  auto whole = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(kRecurrent, whole.get());
  auto split = whole->copy();
  CHECK(mp::SplitRnnLayers(*split) == 2);
  CHECK(Count(split->block(), "aten::lstm") == 2);
  CHECK(Count(split->block(), "aten::gru") == 3);
  CHECK(Count(split->block(), "aten::dropout") == 3);  // between the layers only
  // Without dropout the layers compute what the whole ops compute, final
  // states of every layer and direction included.
  const auto expected = Tensors(mp::GraphRunner(whole).Run(RecurrentInputs(0.0)));
  const auto got = Tensors(mp::GraphRunner(split).Run(RecurrentInputs(0.0)));
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(at::equal(got[i], expected[i]));
  }
  // With it, each dropout draws from a generator of its own: the same key
  // draws the same masks.
  CHECK(mp::SeedRandomOps(*split) == 3);
  const mp::GraphRunner runner(split);
  std::vector<at::Tensor> a, b;
  {
    const mp::RngScope scope({1, 0, 0});
    a = Tensors(runner.Run(RecurrentInputs(0.5)));
  }
  {
    const mp::RngScope scope({1, 0, 0});
    b = Tensors(runner.Run(RecurrentInputs(0.5)));
  }
  CHECK(Same(a, b));
  // The first layer's states come before any dropout, the second's after.
  CHECK(at::equal(a[1].narrow(0, 0, 2), expected[1].narrow(0, 0, 2)));
  CHECK_FALSE(at::equal(a[1].narrow(0, 2, 2), expected[1].narrow(0, 2, 2)));
  CHECK_FALSE(at::equal(a[0], expected[0]));
  CHECK_FALSE(at::equal(a[3], expected[3]));
}

TEST_CASE("a recurrent op whose dropout draws nothing is left whole, and a computed layer count is named") {
  const std::string head = R"IR(
graph(%x : Tensor, %h : Tensor, %w0 : Tensor, %w1 : Tensor, %w2 : Tensor, %w3 : Tensor, %n : int):
  %t : bool = prim::Constant[value=1]()
  %f : bool = prim::Constant[value=0]()
  %zero : float = prim::Constant[value=0.]()
  %p : float = prim::Constant[value=0.5]()
  %two : int = prim::Constant[value=2]()
  %w : Tensor[] = prim::ListConstruct(%w0, %w1, %w2, %w3)
  %y : Tensor, %hy : Tensor = aten::rnn_tanh(%x, %h, %w, %f, %two, %zero, %t, %f, %f)
  %z : Tensor, %zy : Tensor = aten::rnn_tanh(%x, %h, %w, %f, %two, %p, %f, %f, %f)
)IR";
  auto graph = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(head + "  return (%y, %z)\n", graph.get());
  CHECK(mp::SplitRnnLayers(*graph) == 0);
  CHECK(Count(graph->block(), "aten::rnn_tanh") == 2);
  graph = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(head + "  %v : Tensor, %vy : Tensor = aten::rnn_relu(%x, %h, %w, %f, %n, %p, %t, %f, %f)\n"
                             "  return (%y, %z, %v)\n",
                      graph.get());
  CHECK_THROWS_WITH_AS(mp::SplitRnnLayers(*graph),
                       "the model's aten::rnn_relu takes `num_layers` from a computed value; mpexec needs a constant "
                       "there to draw its dropout between layers",
                       mp::InputError);
}

namespace {

// Calls operator `name` (its one overload) boxed: `given` first, then the
// schema's defaults for the arguments left, so one call fits LibTorch
// versions whose schemas differ in trailing defaults.
at::Tensor CallWithDefaults(const char* name, std::vector<c10::IValue> given) {
  const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name, "");
  const auto& args = op.schema().arguments();
  for (size_t i = given.size(); i < args.size(); ++i) given.push_back(*args[i].default_value());
  torch::jit::Stack stack(given.begin(), given.end());
  op.callBoxed(&stack);
  return stack.front().toTensor();
}

// Attention written out: softmax(q kᵀ · scale + mask) v.
at::Tensor Attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                     double scale) {
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) * scale;
  if (mask.defined()) {
    scores = mask.scalar_type() == at::kBool ? scores.masked_fill(~mask, -INFINITY) : scores + mask;
  }
  return at::matmul(at::softmax(scores, -1), v);
}

bool AtenAttention() {
  return c10::Dispatcher::singleton().findSchema({"aten::scaled_dot_product_attention", ""}).has_value();
}

}  // namespace

TEST_CASE("the attention twin computes attention, its dropout drawn from the generator it is given") {
  at::Generator data = at::detail::createCPUGenerator(5);
  const at::Tensor q = at::randn({2, 3, 4, 8}, data);
  const at::Tensor k = at::randn({2, 3, 5, 8}, data);
  const at::Tensor v = at::randn({2, 3, 5, 6}, data);
  const char* twin = "mp::scaled_dot_product_attention";
  const double scale = 1 / std::sqrt(8.0);
  const c10::IValue none;
  CHECK(at::allclose(CallWithDefaults(twin, {q, k, v}), Attention(q, k, v, {}, scale), 1e-5, 1e-6));
  CHECK(at::allclose(CallWithDefaults(twin, {q, k, v, none, 0.0, false, 0.3}), Attention(q, k, v, {}, 0.3), 1e-5,
                     1e-6));
  const at::Tensor causal = at::ones({4, 5}, at::kBool).tril();
  CHECK(at::allclose(CallWithDefaults(twin, {q, k, v, none, 0.0, true}), Attention(q, k, v, causal, scale), 1e-5,
                     1e-6));
  const at::Tensor additive = at::randn({4, 5}, data);
  CHECK(at::allclose(CallWithDefaults(twin, {q, k, v, additive}), Attention(q, k, v, additive, scale), 1e-5, 1e-6));
  // A boolean mask; query 2 may see no key: its row is 0, not NaN.
  at::Tensor allowed = at::rand({4, 5}, data) > 0.4;
  allowed[1][0] = true;
  allowed[2] = false;
  const at::Tensor masked = CallWithDefaults(twin, {q, k, v, allowed});
  CHECK(at::equal(masked.select(-2, 2), at::zeros_like(masked.select(-2, 2))));
  CHECK(at::allclose(masked.narrow(-2, 0, 2), Attention(q, k, v, allowed, scale).narrow(-2, 0, 2), 1e-5, 1e-6));
  // Grouped queries: one key and value head serves the 3 query heads.
  const at::Tensor k1 = k.narrow(1, 0, 1);
  const at::Tensor v1 = v.narrow(1, 0, 1);
  CHECK(at::allclose(CallWithDefaults(twin, {q, k1, v1, none, 0.0, false, none, true}),
                     Attention(q, k1.expand_as(k), v1.expand_as(v), {}, scale), 1e-5, 1e-6));
  CHECK_THROWS_WITH(CallWithDefaults(twin, {q, k, v, causal, 0.0, true}),
                    doctest::Contains("an explicit attn_mask should not be set when is_causal=True"));
  if (AtenAttention()) {  // LibTorch 2.x: the twin computes what ATen's op does
    CHECK(at::allclose(CallWithDefaults(twin, {q, k, v, allowed.logical_or(at::eye(4, 5, at::kBool))}),
                       CallWithDefaults("aten::scaled_dot_product_attention",
                                        {q, k, v, allowed.logical_or(at::eye(4, 5, at::kBool))}),
                       1e-5, 1e-6));
  }

  // Dropout on the weights: the generator's draws, as mp::dropout's.
  const auto drawn = [&](uint64_t seed) {
    return CallWithDefaults(twin, {q, k, v, none, 0.4, false, none, false, at::detail::createCPUGenerator(seed)});
  };
  const at::Tensor kept = at::empty({2, 3, 4, 5}).bernoulli_(0.6, at::detail::createCPUGenerator(9)).div_(0.6);
  const at::Tensor weights = at::softmax(at::matmul(q, k.transpose(-2, -1)) * scale, -1);
  CHECK(at::allclose(drawn(9), at::matmul(weights * kept, v), 1e-5, 1e-6));
  CHECK(at::equal(drawn(9), drawn(9)));
  CHECK_FALSE(at::allclose(drawn(9), drawn(10)));

  // Its gradients are autograd's through the composite.
  const at::Tensor leaf = q.clone().requires_grad_(true);
  CallWithDefaults(twin, {leaf, k, v, allowed, 0.4, false, none, false, at::detail::createCPUGenerator(9)})
      .sum()
      .backward();
  REQUIRE(leaf.grad().defined());
  CHECK(leaf.grad().isfinite().all().item<bool>());
}

// LibTorch 2.x only: 1.13 has no aten::scaled_dot_product_attention.
TEST_CASE("attention with dropout becomes its twin, attention without keeps ATen's op" *
          doctest::skip(!AtenAttention())) {
  const auto& args =
      c10::Dispatcher::singleton().findSchemaOrThrow("aten::scaled_dot_product_attention", "").schema().arguments();
  // Every argument given, as TorchScript writes them: scale (2.1) and
  // enable_gqa (2.5) where this LibTorch has them.
  std::string tail = args.size() > 6 ? ", %none" : "";
  if (args.size() > 7) tail += ", %f";
  const std::string ir = R"IR(
graph(%q : Tensor, %k : Tensor, %v : Tensor):
  %none : NoneType = prim::Constant()
  %f : bool = prim::Constant[value=0]()
  %p : float = prim::Constant[value=0.25]()
  %zero : float = prim::Constant[value=0.]()
  %a : Tensor = aten::scaled_dot_product_attention(%q, %k, %v, %none, %p, %f)IR" + tail + R"IR()
  %b : Tensor = aten::scaled_dot_product_attention(%q, %k, %v, %none, %zero, %f)IR" + tail + R"IR()
  return (%a, %b)
)IR";
  auto graph = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(ir, graph.get());
  CHECK(mp::SeedRandomOps(*graph) == 1);
  CHECK(Count(graph->block(), "mp::scaled_dot_product_attention") == 1);
  CHECK(Count(graph->block(), "aten::scaled_dot_product_attention") == 1);
  const mp::GraphRunner runner(graph);
  at::Generator data = at::detail::createCPUGenerator(6);
  const std::vector<c10::IValue> in = {at::randn({2, 4, 8}, data), at::randn({2, 4, 8}, data),
                                       at::randn({2, 4, 8}, data)};
  std::vector<c10::IValue> first, again;
  {
    const mp::RngScope scope({1, 0, 0});
    first = runner.Run(in);
  }
  {
    const mp::RngScope scope({1, 0, 0});
    again = runner.Run(in);
  }
  CHECK(at::equal(first[0].toTensor(), again[0].toTensor()));
  CHECK_FALSE(at::allclose(first[0].toTensor(), first[1].toTensor()));
}
