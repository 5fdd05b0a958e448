// CutStages / RunStages on IR text: every assignment of a small graph's
// nodes to stages either cuts into stages whose chained output equals the
// whole graph's bit for bit, or is refused with a PlanError.
#include "tests/doctest_torch.h"

#include <torch/csrc/jit/ir/irparser.h>

#include "common/error.h"
#include "planner/graph/cut.h"
#include "zoo.h"

namespace {

mp::CanonicalGraph FromIR(const std::string& ir, size_t num_inputs) {
  mp::CanonicalGraph c;
  c.graph = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(ir, c.graph.get());
  c.num_model_inputs = num_inputs;
  mp::IndexNodes(c);
  return c;
}

std::vector<c10::IValue> Inputs(size_t n) {
  torch::manual_seed(1);
  std::vector<c10::IValue> in;
  for (size_t i = 0; i < n; ++i) in.emplace_back(torch::randn({4, 4}));
  return in;
}

// Fresh copies: some graphs write their inputs in place.
std::vector<c10::IValue> Clone(const std::vector<c10::IValue>& in) {
  std::vector<c10::IValue> out;
  for (const auto& v : in) out.emplace_back(v.toTensor().clone());
  return out;
}

struct Tally {
  int cut = 0;
  int refused = 0;
};

// Tries all stage_of_node in {0..k-1}^n with every stage used.
Tally Exhaustive(const mp::CanonicalGraph& c, int k) {
  const auto inputs = Inputs(c.num_model_inputs);
  const auto want = mp::GraphRunner(c.graph).Run(c.Stack(Clone(inputs)));
  const int n = static_cast<int>(c.nodes.size());
  Tally tally;
  std::vector<int> stage(n, 0);
  long total = 1;
  for (int i = 0; i < n; ++i) total *= k;
  for (long code = 0; code < total; ++code) {
    long rest = code;
    std::vector<bool> used(k, false);
    for (int i = 0; i < n; ++i) {
      stage[i] = static_cast<int>(rest % k);
      rest /= k;
      used[stage[i]] = true;
    }
    if (std::count(used.begin(), used.end(), false)) continue;
    std::vector<mp::StageGraph> stages;
    try {
      stages = mp::CutStages(c, stage);
    } catch (const mp::PlanError& e) {
      if (tally.refused == 0) MESSAGE("first refusal: " << std::string(e.what()));
      ++tally.refused;
      continue;
    }
    CAPTURE(code);
    mp::test::CheckBitEqual(mp::RunStages(c, stages, Clone(inputs)), want);
    ++tally.cut;
  }
  return tally;
}

const char* kInPlaceIR = R"IR(
graph(%x : Tensor):
  %one : int = prim::Constant[value=1]()
  %a : Tensor = aten::mul(%x, %x)
  %b : Tensor = aten::sin(%a)
  %r : Tensor = aten::relu_(%a)
  %c : Tensor = aten::cos(%a)
  %d : Tensor = aten::add_(%a, %b, %one)
  %e : Tensor = aten::mul(%a, %c)
  %f : Tensor = aten::add(%e, %b, %one)
  return (%f))IR";

}  // namespace

TEST_CASE("in-place writes on a value read before and after them, every cut") {
  auto c = FromIR(kInPlaceIR, 1);
  CHECK((c.mutation.WritersOf(c.nodes[1]->output()) == std::vector<int>{3, 5}));
  // sin reads version 0 of %a, cos version 1, the final mul version 2.
  CHECK(c.mutation.VersionAt(c.nodes[1]->output(), 2) == 0);
  CHECK(c.mutation.VersionAt(c.nodes[1]->output(), 4) == 1);
  CHECK(c.mutation.VersionAt(c.nodes[1]->output(), 6) == 2);
  auto two = Exhaustive(c, 2);
  auto three = Exhaustive(c, 3);
  MESSAGE("2 stages: " << two.cut << " cut, " << two.refused << " refused; 3 stages: "
                       << three.cut << " cut, " << three.refused << " refused");
  // Every order-respecting cut works; the contiguous ones alone are 7 and 21.
  CHECK(two.cut >= 7);
  CHECK(three.cut >= 21);
}

TEST_CASE("an in-place write through a view of an activation, every cut") {
  auto c = FromIR(R"IR(
graph(%x : Tensor, %y : Tensor):
  %one : int = prim::Constant[value=1]()
  %shape : int[] = prim::Constant[value=[16]]()
  %a : Tensor = aten::mul(%x, %y)
  %s : Tensor = aten::sigmoid(%a)
  %v : Tensor = aten::view(%a, %shape)
  %t : Tensor = aten::tanh(%a)
  %u : Tensor = aten::add_(%v, %one, %one)
  %z : Tensor = aten::add(%a, %s, %one)
  %q : Tensor = aten::add(%z, %t, %one)
  return (%q))IR", 2);
  // The write to the view %v is a write to %a.
  CHECK((c.mutation.WritersOf(c.nodes[2]->output()) == std::vector<int>{6}));
  auto two = Exhaustive(c, 2);
  MESSAGE("2 stages: " << two.cut << " cut, " << two.refused << " refused");
  CHECK(two.cut >= 8);
}

TEST_CASE("a channel split whose halves meet in torch.cat: a write to one half is not a write to the other") {
  // ShuffleNetV2's unit: x1, x2 = x.chunk(2, 1); cat(x1, branch(x2)) with
  // an in-place relu in the branch. AliasDb counts the relu_ as a write to
  // every tensor torch.cat's list holds, x1 included; the structure shows
  // it writes the branch's own value (storage_roots.h).
  auto c = FromIR(R"IR(
graph(%x : Tensor, %y : Tensor):
  %one : int = prim::Constant[value=1]()
  %two : int = prim::Constant[value=2]()
  %a : Tensor = aten::mul(%x, %y)
  %parts : Tensor[] = aten::chunk(%a, %two, %one)
  %x1 : Tensor, %x2 : Tensor = prim::ListUnpack(%parts)
  %b : Tensor = aten::sin(%x2)
  %r : Tensor = aten::relu_(%b)
  %l : Tensor[] = prim::ListConstruct(%x1, %r)
  %z : Tensor = aten::cat(%l, %one)
  return (%z))IR", 2);
  const torch::jit::Value* x1 = c.nodes[4]->output(0);
  CHECK(c.mutation.WritersOf(x1).empty());
  CHECK(c.mutation.WritersOf(c.nodes[2]->output()).empty());  // %a, chunked
  CHECK((c.mutation.WritersOf(c.nodes[5]->output()) == std::vector<int>{6}));  // %b, written by the relu_
  CHECK_NOTHROW(mp::CutStages(c, std::vector<int>(c.nodes.size(), 0)));  // one stage: refused before
  auto two = Exhaustive(c, 2);
  MESSAGE("2 stages: " << two.cut << " cut, " << two.refused << " refused");
  CHECK(two.cut >= 8);
}

TEST_CASE("a dict filled by _set_item: writes to what goes in are not writes to every parameter, every cut") {
  // torchvision's IntermediateLayerGetter (LR-ASPP, FCN, DeepLabV3): a
  // backbone's features put in an OrderedDict layer by layer and taken out
  // by the head. AliasDb lets every tensor that enters a dict alias every
  // graph input, so hardswish_ on a feature "wrote" the weight %w, and
  // BatchNorm's num_batches_tracked.add_ (%n) "wrote" the features taken
  // out; the cutter then refused the cuts.
  auto c = FromIR(R"IR(
graph(%x : Tensor, %w : Tensor, %n : Tensor):
  %one : int = prim::Constant[value=1]()
  %low : str = prim::Constant[value="low"]()
  %high : str = prim::Constant[value="high"]()
  %d : Dict(str, Tensor) = aten::dict()
  %a : Tensor = aten::mul(%x, %w)
  %r : Tensor = aten::relu_(%a)
  aten::_set_item(%d, %low, %r)
  %b : Tensor = aten::mul(%r, %w)
  %h : Tensor = aten::hardswish_(%b)
  aten::_set_item(%d, %high, %h)
  %lo : Tensor = aten::__getitem__(%d, %low)
  %hi : Tensor = aten::__getitem__(%d, %high)
  %t : Tensor = aten::add_(%n, %one, %one)
  %s : Tensor = aten::add(%lo, %hi, %one)
  %y : Tensor = aten::mul(%s, %w)
  return (%y, %t))IR", 3);
  // The parser names values by number: the n-th output of a node kind.
  const auto output = [&](const char* kind, int nth) -> const torch::jit::Value* {
    for (const torch::jit::Node* node : c.nodes)
      if (node->kind() == c10::Symbol::fromQualString(kind) && nth-- == 0) return node->output();
    FAIL("no " << kind);
    return nullptr;
  };
  const torch::jit::Value *w = c.graph->inputs()[1], *n = c.graph->inputs()[2];
  CHECK(c.mutation.WritersOf(w).empty());
  CHECK(c.mutation.WritersOf(output("aten::__getitem__", 0)).empty());
  CHECK(c.mutation.WritersOf(output("aten::__getitem__", 1)).empty());
  CHECK(c.mutation.WritersOf(n).size() == 1);
  CHECK(c.mutation.WritersOf(output("aten::dict", 0)).size() == 2);  // the dict itself, by each _set_item
  CHECK_NOTHROW(mp::CutStages(c, std::vector<int>(c.nodes.size(), 0)));
  auto two = Exhaustive(c, 2);
  MESSAGE("2 stages: " << two.cut << " cut, " << two.refused << " refused");
  CHECK(two.cut >= 100);
}

TEST_CASE("a write through one half of a chunk is a write to the chunked value, every cut") {
  auto c = FromIR(R"IR(
graph(%x : Tensor, %y : Tensor):
  %one : int = prim::Constant[value=1]()
  %two : int = prim::Constant[value=2]()
  %a : Tensor = aten::mul(%x, %y)
  %parts : Tensor[] = aten::chunk(%a, %two, %one)
  %x1 : Tensor, %x2 : Tensor = prim::ListUnpack(%parts)
  %s : Tensor = aten::sigmoid(%a)
  %r : Tensor = aten::relu_(%x2)
  %l : Tensor[] = prim::ListConstruct(%x1, %r)
  %z : Tensor = aten::cat(%l, %one)
  %q : Tensor = aten::add(%a, %s, %one)
  %w : Tensor = aten::add(%q, %z, %one)
  return (%w))IR", 2);
  CHECK((c.mutation.WritersOf(c.nodes[2]->output()) == std::vector<int>{6}));  // %a, through %x2
  auto two = Exhaustive(c, 2);
  MESSAGE("2 stages: " << two.cut << " cut, " << two.refused << " refused");
  CHECK(two.cut >= 8);
}

TEST_CASE("an in-place write on a model input, every cut") {
  auto c = FromIR(R"IR(
graph(%x : Tensor, %y : Tensor):
  %one : int = prim::Constant[value=1]()
  %s : Tensor = aten::sigmoid(%x)
  %w : Tensor = aten::mul_(%x, %y)
  %z : Tensor = aten::add(%x, %s, %one)
  return (%z))IR", 2);
  auto two = Exhaustive(c, 2);
  auto three = Exhaustive(c, 3);
  MESSAGE("2 stages: " << two.cut << " cut; 3 stages: " << three.cut << " cut");
  CHECK(two.cut >= 3);
  CHECK(three.cut >= 3);
}

TEST_CASE("a prim::If reading outer values is cut as one unit") {
  auto c = FromIR(R"IR(
graph(%x : Tensor, %y : Tensor):
  %one : int = prim::Constant[value=1]()
  %none : NoneType = prim::Constant()
  %a : Tensor = aten::relu(%x)
  %s : Tensor = aten::sum(%y, %none)
  %flag : bool = aten::Bool(%s)
  %r : Tensor = prim::If(%flag)
    block0():
      %p : Tensor = aten::add(%a, %y, %one)
      -> (%p)
    block1():
      %m : Tensor = aten::mul(%a, %x)
      -> (%m)
  %o : Tensor = aten::add(%r, %a, %one)
  return (%o))IR", 2);
  auto tally = Exhaustive(c, 2);
  CHECK(tally.cut >= 5);
}

TEST_CASE("stage graphs: inputs, outputs and cloned constants") {
  auto c = FromIR(kInPlaceIR, 1);
  // mul | sin relu_ cos | add_ mul add, with the constant in stage 0.
  auto stages = mp::CutStages(c, {0, 0, 1, 1, 1, 2, 2, 2});
  REQUIRE(stages.size() == 3);
  CHECK((stages[0].nodes == std::vector<int>{0, 1}));
  // Stage 1 writes %a (relu_) after receiving it: it works on a clone so
  // stage 2 can still be given the version it needs.
  int clones = 0;
  for (auto* node : stages[1].graph->nodes()) clones += node->kind() == c10::aten::clone;
  CHECK(clones == 1);
  // Stage 2 needs the constant 1: cloned in, never received.
  for (const auto& in : stages[2].inputs) CHECK(in.value->node()->kind() != c10::prim::Constant);
  int constants = 0;
  for (auto* node : stages[2].graph->nodes()) constants += node->kind() == c10::prim::Constant;
  CHECK(constants >= 1);
  CHECK(stages[2].graph->outputs().size() == 1);
  CHECK(stages[2].outputs.size() == 1);
}

TEST_CASE("invalid cuts are PlanErrors that say what is wrong") {
  auto c = FromIR(kInPlaceIR, 1);
  CHECK_THROWS_WITH_AS(mp::CutStages(c, {0, 0, 1}), doctest::Contains("assigns 3 nodes, graph has 8"), mp::PlanError);
  CHECK_THROWS_WITH_AS(mp::CutStages(c, {0, 0, 0, -1, 0, 0, 0, 0}), doctest::Contains("node 3 has no stage"), mp::PlanError);
  CHECK_THROWS_WITH_AS(mp::CutStages(c, {0, 0, 0, 0, 0, 2, 2, 2}), doctest::Contains("stage 1 has no nodes"), mp::PlanError);
  CHECK_THROWS_WITH_AS(mp::CutStages(c, {0, 1, 0, 1, 1, 1, 1, 1}), doctest::Contains("from later stage 1"), mp::PlanError);
}
