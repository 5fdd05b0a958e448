// SeedRandomOps and the mp:: operators it rewrites to. Steps:
//   1. collect the random ops, depth first through blocks, in graph order
//      (their ordinals k are then stable for a given graph);
//   2. for each, put `mp::generator(k)` just before it and give it to the
//      op: in place of its `None` generator argument, by switching to the
//      overload that takes one, or by switching to the op's mp:: twin.
// The twins below follow ATen 1.13's CPU kernels operation by operation
// (aten/src/ATen/native/Dropout.cpp, TensorFactories.cpp), with the
// generator passed to bernoulli_/uniform_/normal_/random_, so a seeded
// graph computes what the original would have with that generator; being
// composites of ATen ops, their gradients come from autograd as ATen's own.
#include "planner/graph/seed_random_ops.h"

#include <ATen/ATen.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <new>
#include <set>
#include <tuple>

#include "common/error.h"
#include "planner/graph/rng_scope.h"

namespace mp {
namespace {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;
using OptGenerator = c10::optional<at::Generator>;

// --- the operators ---------------------------------------------------------

at::Tensor FeatureNoise(const at::Tensor& input) {
  TORCH_CHECK(input.dim() >= 2, "Feature dropout requires at least 2 dimensions in the input");
  std::vector<int64_t> sizes(input.dim(), 1);
  sizes[0] = input.size(0);
  sizes[1] = input.size(1);
  return at::empty(sizes, input.options());
}

at::Tensor Dropout(const at::Tensor& input, double p, bool train, bool feature, bool alpha, bool inplace,
                   const OptGenerator& generator) {
  TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  if (p == 0 || !train || input.numel() == 0) return input;
  if (p == 1) {
    const at::Tensor zero = at::zeros({}, input.options());
    return inplace ? input.mul_(zero) : input.mul(zero);
  }
  at::Tensor noise = feature ? FeatureNoise(input) : at::empty_like(input, at::MemoryFormat::Contiguous);
  noise.bernoulli_(1 - p, generator);
  at::Tensor shift;
  if (alpha) {
    constexpr double kAlpha = 1.7580993408473766;
    const double a = 1. / std::sqrt((kAlpha * kAlpha * p + 1) * (1 - p));
    shift = noise.add(-1).mul_(kAlpha * a).add_(kAlpha * a * p);
    noise.mul_(a);
  } else {
    noise.div_(1 - p);
  }
  at::Tensor out = inplace ? input.mul_(noise) : input.mul(noise);
  return alpha ? out.add_(shift) : out;
}

template <bool kFeature, bool kAlpha, bool kInplace>
at::Tensor DropoutOp(const at::Tensor& input, double p, bool train, OptGenerator generator) {
  return Dropout(input, p, train, kFeature, kAlpha, kInplace, generator);
}

std::tuple<at::Tensor, at::Tensor> NativeDropout(const at::Tensor& input, double p, c10::optional<bool> train,
                                                 OptGenerator generator) {
  if (input.numel() == 0) return {input, at::empty_like(input)};
  if (train.has_value() && !*train) return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  const double keep = 1. - p;
  const double scale = keep == 0 ? 0. : 1. / keep;
  at::Tensor mask = at::empty_like(input, at::MemoryFormat::Contiguous);
  mask.bernoulli_(keep, generator);
  return {input.mul(mask).mul_(scale), mask.to(at::kBool)};
}

at::TensorOptions LikeOptions(c10::optional<at::ScalarType> dtype, c10::optional<at::Layout> layout,
                              c10::optional<at::Device> device, c10::optional<bool> pin_memory) {
  return at::TensorOptions().dtype(dtype).layout(layout).device(device).pinned_memory(pin_memory);
}

at::Tensor RandLike(const at::Tensor& self, c10::optional<at::ScalarType> dtype, c10::optional<at::Layout> layout,
                    c10::optional<at::Device> device, c10::optional<bool> pin_memory,
                    c10::optional<at::MemoryFormat> memory_format, OptGenerator generator) {
  return at::empty_like(self, LikeOptions(dtype, layout, device, pin_memory), memory_format).uniform_(0, 1, generator);
}

at::Tensor RandnLike(const at::Tensor& self, c10::optional<at::ScalarType> dtype, c10::optional<at::Layout> layout,
                     c10::optional<at::Device> device, c10::optional<bool> pin_memory,
                     c10::optional<at::MemoryFormat> memory_format, OptGenerator generator) {
  return at::empty_like(self, LikeOptions(dtype, layout, device, pin_memory), memory_format).normal_(0, 1, generator);
}

at::Tensor RandintLike(const at::Tensor& self, int64_t high, c10::optional<at::ScalarType> dtype,
                       c10::optional<at::Layout> layout, c10::optional<at::Device> device,
                       c10::optional<bool> pin_memory, c10::optional<at::MemoryFormat> memory_format,
                       OptGenerator generator) {
  return at::empty_like(self, LikeOptions(dtype, layout, device, pin_memory), memory_format)
      .random_(0, high, generator);
}

at::Tensor RandintLikeLow(const at::Tensor& self, int64_t low, int64_t high, c10::optional<at::ScalarType> dtype,
                          c10::optional<at::Layout> layout, c10::optional<at::Device> device,
                          c10::optional<bool> pin_memory, c10::optional<at::MemoryFormat> memory_format,
                          OptGenerator generator) {
  return at::empty_like(self, LikeOptions(dtype, layout, device, pin_memory), memory_format)
      .random_(low, high, generator);
}

// scaled_dot_product_attention as ATen 2.x's math path computes it
// (_scaled_dot_product_attention_math: both sides scaled by the root of the
// scale, a boolean mask or is_causal masking with -inf, rows masked
// everywhere weighted 0 as _safe_softmax does), with the dropout on the
// weights drawn from `generator`. LibTorch 2.x calls the op
// nondeterministic when dropout_p is not 0: nn.MultiheadAttention's
// training path, so nn.TransformerEncoderLayer's. An op that draws nothing
// keeps ATen's own kernels (DrawsNothing).
at::Tensor ScaledDotProductAttention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                                     const c10::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                                     c10::optional<double> scale, bool enable_gqa, OptGenerator generator) {
  const bool has_mask = attn_mask.has_value() && attn_mask->defined();
  TORCH_CHECK(!(is_causal && has_mask),
              "scaled_dot_product_attention: an explicit attn_mask should not be set when is_causal=True");
  const double root = std::sqrt(scale ? *scale : 1. / std::sqrt(double(query.size(-1))));
  at::Tensor k = key;
  at::Tensor v = value;
  if (enable_gqa) {
    k = k.repeat_interleave(query.size(-3) / key.size(-3), -3);
    v = v.repeat_interleave(query.size(-3) / value.size(-3), -3);
  }
  at::Tensor scores = at::matmul(query.mul(root), k.mul(root).transpose(-2, -1));
  c10::optional<at::Tensor> mask;
  if (is_causal) {
    mask = at::ones({query.size(-2), key.size(-2)}, query.options().dtype(at::kBool)).tril();
  } else if (has_mask) {
    mask = *attn_mask;
  }
  const double minus_infinity = -std::numeric_limits<double>::infinity();
  if (mask) scores = mask->scalar_type() == at::kBool ? scores.masked_fill(mask->logical_not(), minus_infinity)
                                                      : scores.add(*mask);
  at::Tensor weights = at::softmax(scores, -1);
  if (mask) weights = weights.masked_fill(scores.eq(minus_infinity).all(-1, true), 0);
  if (dropout_p > 0) weights = Dropout(weights, dropout_p, true, false, false, false, generator);
  return at::matmul(weights, v);
}

// Boxed: LibTorch versions infer different schemas for an unboxed
// function returning at::Generator.
void GeneratorOp(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  const int64_t op = torch::jit::pop(*stack).toInt();
  torch::jit::push(*stack, c10::IValue(OpGenerator(op)));
}

#define MP_LIKE_ARGS \
  "*, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, " \
  "MemoryFormat? memory_format=None, Generator? generator=None"

void Define(torch::Library& m) {
  // Conservative: never folded, pooled or removed by a JIT pass.
  m.def(torch::schema("generator(int op) -> Generator", c10::AliasAnalysisKind::CONSERVATIVE),
        torch::CppFunction::makeFromBoxedFunction<&GeneratorOp>());
  m.def("dropout(Tensor input, float p, bool train, Generator? generator=None) -> Tensor",
        &DropoutOp<false, false, false>);
  m.def("dropout_(Tensor(a!) self, float p, bool train, Generator? generator=None) -> Tensor(a!)",
        &DropoutOp<false, false, true>);
  m.def("feature_dropout(Tensor input, float p, bool train, Generator? generator=None) -> Tensor",
        &DropoutOp<true, false, false>);
  m.def("feature_dropout_(Tensor(a!) self, float p, bool train, Generator? generator=None) -> Tensor(a!)",
        &DropoutOp<true, false, true>);
  m.def("alpha_dropout(Tensor input, float p, bool train, Generator? generator=None) -> Tensor",
        &DropoutOp<false, true, false>);
  m.def("alpha_dropout_(Tensor(a!) self, float p, bool train, Generator? generator=None) -> Tensor(a!)",
        &DropoutOp<false, true, true>);
  m.def("feature_alpha_dropout(Tensor input, float p, bool train, Generator? generator=None) -> Tensor",
        &DropoutOp<true, true, false>);
  m.def("feature_alpha_dropout_(Tensor(a!) self, float p, bool train, Generator? generator=None) -> Tensor(a!)",
        &DropoutOp<true, true, true>);
  m.def("native_dropout(Tensor input, float p, bool? train, Generator? generator=None) -> (Tensor, Tensor)",
        &NativeDropout);
  m.def("rand_like(Tensor self, " MP_LIKE_ARGS ") -> Tensor", &RandLike);
  m.def("randn_like(Tensor self, " MP_LIKE_ARGS ") -> Tensor", &RandnLike);
  m.def("randint_like(Tensor self, int high, " MP_LIKE_ARGS ") -> Tensor", &RandintLike);
  m.def("scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask=None, "
        "float dropout_p=0., bool is_causal=False, float? scale=None, bool enable_gqa=False, "
        "Generator? generator=None) -> Tensor",
        &ScaledDotProductAttention);
  m.def("randint_like.low_dtype(Tensor self, int low, int high, " MP_LIKE_ARGS ") -> Tensor", &RandintLikeLow);
}

// Registered at load and never unregistered (TORCH_LIBRARY would at exit):
// by then LibTorch's dispatcher may be half gone, and ThreadSanitizer saw
// the deregistration unlock a dispatcher mutex it no longer knew as locked.
// The library lives in static storage and is never destroyed; what it
// allocates stays reachable from there (a heap copy was a leak to LSan).
alignas(torch::Library) unsigned char library_storage[sizeof(torch::Library)];
const bool kRegistered = [] {
  Define(*new (library_storage) torch::Library(torch::Library::DEF, "mp", c10::nullopt, __FILE__, __LINE__));
  return true;
}();

// --- the rewrite -----------------------------------------------------------

bool IsGenerator(const c10::Argument& argument) {
  c10::TypePtr type = argument.type();
  if (auto optional = type->cast<c10::OptionalType>()) type = optional->getElementType();
  return type->kind() == c10::TypeKind::GeneratorType;
}

int GeneratorArgument(const c10::FunctionSchema& schema) {
  const auto& args = schema.arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    if (IsGenerator(args[i])) return int(i);
  }
  return -1;
}

// Where `schema`'s twin overload of its own name takes a generator: the
// position in an overload whose arguments are `schema`'s plus a generator.
int GeneratorOverloadPosition(const c10::FunctionSchema& schema, c10::Symbol kind) {
  const auto& want = schema.arguments();
  for (const auto& op : torch::jit::getAllOperatorsFor(kind)) {
    const auto& args = op->schema().arguments();
    const int g = GeneratorArgument(op->schema());
    if (g < 0 || args.size() != want.size() + 1) continue;
    bool same = true;
    for (size_t i = 0, j = 0; same && i < args.size(); ++i) {
      if (int(i) == g) continue;
      same = args[i].name() == want[j].name() && *args[i].type() == *want[j].type();
      ++j;
    }
    if (same) return g;
  }
  return -1;
}

bool ConstantFalse(const Node* node, const char* name) {
  const auto index = node->schema().argumentIndexWithName(name);
  if (!index) return false;
  const auto value = torch::jit::toIValue(node->input(*index));
  return value && value->isBool() && !value->toBool();
}

const c10::Symbol kAttention = c10::Symbol::fromQualString("aten::scaled_dot_product_attention");

const std::set<std::string>& Twins() {
  static const std::set<std::string> twins = {
      "aten::dropout",          "aten::dropout_",          "aten::feature_dropout",
      "aten::feature_dropout_", "aten::alpha_dropout",     "aten::alpha_dropout_",
      "aten::feature_alpha_dropout", "aten::feature_alpha_dropout_", "aten::native_dropout",
      "aten::rand_like",        "aten::randn_like",        "aten::randint_like",
      "aten::scaled_dot_product_attention"};
  return twins;
}

void CollectRandomOps(torch::jit::Block* block, std::vector<Node*>& out) {
  for (Node* node : block->nodes()) {
    for (torch::jit::Block* inner : node->blocks()) CollectRandomOps(inner, out);
    const c10::FunctionSchema* schema = node->maybeSchema();
    if (!schema) continue;
    if (GeneratorArgument(*schema) >= 0 || GeneratorOverloadPosition(*schema, node->kind()) >= 0 ||
        Twins().count(node->kind().toQualString())) {
      if (!ConstantFalse(node, "train") && !(node->kind() == kAttention && DrawsNothing(node))) out.push_back(node);
    } else if (node->isNondeterministic() && !DrawsNothing(node)) {
      throw InputError(Concat("the model calls ", schema->operator_name().name,
                              ", a random op that mpexec cannot give its own generator"));
    }
  }
}

Value* InsertGenerator(Graph& graph, Node* before, int op) {
  torch::jit::WithInsertPoint guard(before);
  Value* generator = graph.insert(c10::Symbol::fromQualString("mp::generator"), {int64_t(op)});
  generator->node()->copyMetadata(before);
  return generator;
}

// The twin's arguments that `node`'s LibTorch has not (scaled_dot_product_attention
// took no scale before 2.1 and no enable_gqa before 2.5), as constants of
// their defaults, before the generator.
void AddDefaults(Graph& graph, Node* twin, Node* node) {
  const auto& ops = torch::jit::getAllOperatorsFor(twin->kind());
  if (ops.size() != 1) return;  // randint_like has two: each node has all of its overload's
  const auto& args = ops.front()->schema().arguments();
  torch::jit::WithInsertPoint guard(node);
  for (size_t i = twin->inputs().size(); i + 1 < args.size() && args[i].default_value(); ++i) {
    twin->addInput(graph.insertConstant(*args[i].default_value()));
  }
}

void Seed(Graph& graph, Node* node, int op) {
  const c10::FunctionSchema schema = node->schema();
  Value* generator = InsertGenerator(graph, node, op);
  if (const int g = GeneratorArgument(schema); g >= 0) {
    if (!node->input(g)->mustBeNone()) {
      throw InputError(Concat("the model passes its own generator to ", schema.operator_name().name,
                              "; mpexec gives every random op its own"));
    }
    node->replaceInput(g, generator);
  } else if (const int g = GeneratorOverloadPosition(schema, node->kind()); g >= 0) {
    node->insertInput(g, generator);
  } else {
    Node* twin = graph.create(c10::Symbol::fromQualString("mp::" + std::string(node->kind().toUnqualString())),
                              node->outputs().size());
    for (Value* in : node->inputs()) twin->addInput(in);
    AddDefaults(graph, twin, node);
    twin->addInput(generator);
    for (size_t i = 0; i < node->outputs().size(); ++i) twin->output(i)->copyMetadata(node->output(i));
    twin->copyMetadata(node);
    twin->insertBefore(node);
    node->replaceAllUsesWith(twin);
    node->destroy();
    node = twin;
  }
  if (!node->maybeSchema()) {
    throw InternalError(Concat("seeding ", schema.operator_name().name, " left a node that matches no operator"));
  }
}

}  // namespace

bool DrawsNothing(const Node* node) {
  if (ConstantFalse(node, "train")) return true;
  for (const char* name : {"dropout", "dropout_p"}) {
    const auto index = node->schema().argumentIndexWithName(name);
    if (!index) continue;
    const auto value = torch::jit::toIValue(node->input(*index));
    return value && value->isDouble() && value->toDouble() == 0;
  }
  return false;
}

int SeedRandomOps(Graph& graph) {
  std::vector<Node*> random;
  CollectRandomOps(graph.block(), random);
  for (size_t k = 0; k < random.size(); ++k) Seed(graph, random[k], int(k));
  return int(random.size());
}

}  // namespace mp
