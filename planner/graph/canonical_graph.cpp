// Canonicalize: TorchScript module -> canonical graph (see DESIGN.md, "The
// graph"). The steps, in order:
//   1. copy forward's graph, BindArguments: arguments the input spec leaves
//      out take their defaults, a tuple of tensors becomes one input per
//      element; Inline every method and function call; `x is None` on a
//      given tensor folds (FoldNoneChecks);
//      RewriteContextManagers: `with torch.no_grad():` becomes detaches,
//      record_function and autocast(enabled=False) go;
//   2. LiftParameters: tensors to named inputs, other attributes to constants;
//   3. ConstantPropagation folds `if self.training` and friends,
//      UnrollForLoops makes a `for` over a constant range copies of its body
//      (ALBERT's one layer applied N times can be cut between layers), then
//      ConstantPooling and EliminateDeadCode leave one node per real op,
//      and parameters nothing reads any more are dropped;
//   4. SplitRnnLayers: a multi-layer LSTM / GRU / RNN with dropout becomes
//      a call per layer with an aten::dropout between, then SeedRandomOps:
//      every random op draws from its own generator, keyed at run time by
//      (seed, step, micro-batch), never from the global one;
//   5. number the top-level nodes (graph order is a topological order),
//      name each node's layer, hash the printed IR.
#include "planner/graph/canonical_graph.h"

#include <torch/csrc/jit/passes/constant_pooling.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/inliner.h>

#include <iostream>

#include "common/dump.h"
#include "common/error.h"
#include "planner/graph/fingerprint.h"
#include "planner/graph/layer_name.h"
#include "planner/graph/model_arguments.h"
#include "planner/graph/context_managers.h"
#include "planner/graph/seed_random_ops.h"
#include "planner/graph/split_rnn_layers.h"
#include "planner/graph/unroll_loops.h"

namespace mp {

int CanonicalGraph::OwnerId(const torch::jit::Node* node) const {
  while (node->owningBlock() != graph->block()) node = node->owningBlock()->owningNode();
  return NodeId(node);
}

std::vector<c10::IValue> CanonicalGraph::Stack(const std::vector<c10::IValue>& model_inputs) const {
  if (model_inputs.size() != num_model_inputs) {
    throw InputError(Concat("model takes ", num_model_inputs, " inputs, got ", model_inputs.size()));
  }
  std::vector<c10::IValue> stack = model_inputs;
  for (const auto& param : params) stack.emplace_back(param.tensor);
  return stack;
}

namespace {

void CollectOuterInputs(const torch::jit::Node* node, const torch::jit::Graph& graph,
                        std::vector<const torch::jit::Value*>& out) {
  for (const torch::jit::Value* in : node->inputs()) {
    if (in->node() == graph.param_node() || in->node()->owningBlock() == graph.block()) {
      out.push_back(in);
    }
  }
  for (const auto* block : node->blocks()) {
    for (const torch::jit::Node* inner : block->nodes()) CollectOuterInputs(inner, graph, out);
    CollectOuterInputs(block->return_node(), graph, out);
  }
}

// ConstantPropagation until it changes nothing (at most 8 passes). One
// pass of LibTorch 1.13's does not fold everything foldable, and not the
// same things every time: torchvision's Swin folded the `aten::neg` of a
// constant window size in its shifted-window mask in most runs and left it
// in about one in thirty, in one process or another (the same graph in,
// three different graphs out in 60 runs), so a plan made in one process
// read as made for another graph in the next (mpexec: "the plan was made
// for graph ..."). At the fixed point every foldable node is folded, and
// the runs gave one graph (numbered apart: see the copy in Canonicalize).
void FoldConstants(std::shared_ptr<torch::jit::Graph>& graph) {
  for (int pass = 0; pass < 8 && torch::jit::ConstantPropagation(graph); ++pass) {
  }
}

// `x is None` / `x is not None` on a value that cannot be None (an
// Optional[Tensor] the spec gives, typed Tensor by BindArguments) becomes
// its constant answer, so FoldConstants keeps the branch a call with the
// argument runs: Hugging Face's `if token_type_ids is None:` kept both,
// and the embedding behind the If hid the ids' value range from
// ResolveInputs. (LibTorch's PeepholeOptimize does this among much else.)
void FoldNoneChecks(torch::jit::Block* block) {
  for (torch::jit::Node* node : block->nodes()) {
    for (torch::jit::Block* inner : node->blocks()) FoldNoneChecks(inner);
    const bool is = node->kind() == c10::aten::__is__;
    if (!is && node->kind() != c10::aten::__isnot__) continue;
    const auto none = [](const torch::jit::Value* v) { return v->type()->kind() == c10::TypeKind::NoneType; };
    const auto tensor = [](const torch::jit::Value* v) { return v->type()->kind() == c10::TypeKind::TensorType; };
    const torch::jit::Value* a = node->input(0);
    const torch::jit::Value* b = node->input(1);
    if (!(none(a) && tensor(b)) && !(tensor(a) && none(b))) continue;
    torch::jit::WithInsertPoint here(node);
    node->output()->replaceAllUsesWith(node->owningGraph()->insertConstant(!is));
  }
}

}  // namespace

std::vector<const torch::jit::Value*> OuterInputs(const torch::jit::Node* node) {
  std::vector<const torch::jit::Value*> out;
  CollectOuterInputs(node, *node->owningGraph(), out);
  return out;
}

void IndexNodes(CanonicalGraph& canonical, const CallSitePaths& call_sites) {
  canonical.nodes.clear();
  canonical.layers.clear();
  canonical.node_ids_.clear();
  for (torch::jit::Node* node : canonical.graph->nodes()) {
    canonical.node_ids_[node] = static_cast<int>(canonical.nodes.size());
    canonical.nodes.push_back(node);
    canonical.layers.push_back(LayerName(node, call_sites));
  }
  // Parameters that take no gradient (a frozen backbone) make training
  // another job on the same graph: another profile, another plan. Named in
  // the hash only where there are any, so other fingerprints stay as they were.
  std::string frozen;
  for (const LiftedTensor& p : canonical.params) {
    if (p.is_parameter && !p.tensor.requires_grad()) frozen += " " + p.name;
  }
  canonical.fingerprint = Fingerprint(*canonical.graph);
  if (!frozen.empty()) canonical.fingerprint = Fnv1a64Hex(canonical.fingerprint + " frozen:" + frozen);
  canonical.mutation = AnalyzeMutation(canonical);
}

CanonicalGraph Canonicalize(torch::jit::Module& module, const CanonicalOptions& options) {
  module.train(options.training);
  CanonicalGraph canonical;
  const torch::jit::Method forward = module.get_method("forward");
  canonical.graph = forward.graph()->copy();
  auto& graph = canonical.graph;
  canonical.input_names = BindArguments(*graph, forward.function().getSchema(), options.given);
  torch::jit::Inline(*graph);
  FoldNoneChecks(graph->block());
  RewriteContextManagers(*graph);
  canonical.num_model_inputs = graph->inputs().size() - 1;  // all but self
  canonical.params = LiftParameters(*graph, module);

  FoldConstants(graph);
  if (UnrollForLoops(*graph) > 0) FoldConstants(graph);
  torch::jit::ConstantPooling(graph);
  torch::jit::EliminateDeadCode(graph);
  // The values the passes made are numbered in the order they were made,
  // which is FoldConstants' passes' order: the same graph came out of it
  // numbered two ways (Swin in training, one run in ten), and the printed
  // IR, and so the fingerprint, with it. A copy numbers them in graph order.
  graph = graph->copy();
  // State that only folded-away code read (num_batches_tracked in eval mode)
  // is not an input of the canonical graph.
  for (size_t i = graph->inputs().size(); i-- > canonical.num_model_inputs;) {
    if (graph->inputs()[i]->uses().empty()) {
      graph->eraseInput(i);
      canonical.params.erase(canonical.params.begin() + (i - canonical.num_model_inputs));
    }
  }
  SplitRnnLayers(*graph);
  canonical.random_ops = SeedRandomOps(*graph);
  IndexNodes(canonical, CallSitePaths(module));
  if (DumpRequested("canonical")) std::cerr << "MP_DUMP canonical (" << canonical.nodes.size() << " nodes):\n" << *graph;
  return canonical;
}

}  // namespace mp
