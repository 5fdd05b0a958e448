// CanonicalGraph -> OpGraph. Values are numbered graph inputs first (model
// inputs, then parameters), then the outputs of each top-level node in
// canonical order. A node's inputs include the outer values its blocks
// read, so a prim::If that uses a tensor from far above depends on it.
//
// FillShapes adds, after every top-level tensor value, aten::size and
// prim::dtype nodes, returns those instead of the tensors, and runs the
// probe graph once: every shape for the memory of one forward pass. A
// value that may be uninitialized at run time is returned whole instead.
#include "planner/graph/build_op_graph.h"

#include <algorithm>
#include <unordered_map>

#include "common/error.h"
#include "planner/graph/gradient_free.h"
#include "planner/graph/mutation.h"
#include "planner/graph/node_program.h"
#include "planner/graph/run_graph.h"
#include "planner/graph/saved_values.h"

namespace mp {
namespace {

using torch::jit::Node;
using torch::jit::Value;

void SortUnique(std::vector<int>& ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
}

// A Tensor-typed value that may hold no tensor at run time: what
// TorchScript puts on the untaken side of an early return or a raise
// (prim::Uninitialized), passed out of an If or a Loop. nn.TransformerEncoder
// returns its fast path's result that way. The probe returns such a value
// whole instead of asking for its size.
bool MayBeUninitialized(const Value* v) {
  const Node* node = v->node();
  if (node->kind() == c10::prim::Uninitialized) return true;
  const size_t i = v->offset();
  if (node->kind() == c10::prim::If) {
    for (const auto* block : node->blocks()) {
      if (MayBeUninitialized(block->outputs()[i])) return true;
    }
  } else if (node->kind() == c10::prim::Loop) {  // outputs: the carried values
    if (MayBeUninitialized(node->inputs()[i + 2]) || MayBeUninitialized(node->blocks()[0]->outputs()[i + 1])) {
      return true;
    }
  }
  return false;
}

void SetTensor(OpValue& value, const at::Tensor& tensor) {
  value.dtype = DtypeName(tensor.scalar_type());
  value.shape = tensor.sizes().vec();
  value.bytes = static_cast<int64_t>(tensor.numel() * tensor.element_size());
}

}  // namespace

OpGraph BuildOpGraph(const CanonicalGraph& canonical) {
  const auto& graph = *canonical.graph;
  OpGraph op;
  op.fingerprint = canonical.fingerprint;
  std::unordered_map<const Value*, int> value_ids;
  auto add_value = [&](const Value* v, int producer) {
    OpValue value;
    value.id = static_cast<int>(op.values.size());
    value.name = v->debugName();
    value.type = v->type()->annotation_str();
    value.producer = producer;
    value.rematerializable = canonical.mutation.rematerializable.count(v) > 0;
    value_ids[v] = value.id;
    op.values.push_back(value);
    return value.id;
  };
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const int id = add_value(graph.inputs()[i], -1);
    if (i < canonical.num_model_inputs) {
      op.inputs.push_back(id);
    } else {
      op.values[id].name = canonical.params[i - canonical.num_model_inputs].name;
      op.values[id].is_param = true;
      op.values[id].frozen = !canonical.params[i - canonical.num_model_inputs].tensor.requires_grad();
      op.params.push_back(id);
    }
  }
  for (size_t n = 0; n < canonical.nodes.size(); ++n) {
    const Node* node = canonical.nodes[n];
    OpNode op_node;
    op_node.id = static_cast<int>(n);
    op_node.kind = node->kind().toQualString();
    op_node.layer = canonical.layers[n];
    op_node.has_blocks = !node->blocks().empty();
    op_node.mutates = false;
    for (const Value* out : node->outputs()) op_node.outputs.push_back(add_value(out, op_node.id));
    for (const Value* in : OuterInputs(node)) op_node.inputs.push_back(value_ids.at(in));
    SortUnique(op_node.inputs);
    for (int v : op_node.inputs) op.values[v].consumers.push_back(op_node.id);
    op.nodes.push_back(op_node);
  }
  std::vector<InPlaceWrite> writes;
  for (const auto& [value, writers] : canonical.mutation.writers) {
    const auto id = value_ids.find(value);
    for (int w : writers) {
      op.nodes[w].mutates = true;
      if (id == value_ids.end()) continue;  // a value inside a block: its owner's output is what others read
      const bool statistics = WritingOp(canonical.nodes[w]).find("norm") != std::string::npos;
      writes.push_back({id->second, w, statistics});
    }
  }
  for (size_t i = canonical.num_model_inputs; i < graph.inputs().size(); ++i) {
    const Value* param = graph.inputs()[i];
    const std::vector<int>& writers = canonical.mutation.WritersOf(param);
    if (writers.empty()) continue;
    SharedState state{value_ids.at(param), writers};
    for (const auto& use : param->uses()) {
      if (use.user != graph.return_node()) state.nodes.push_back(canonical.OwnerId(use.user));
    }
    SortUnique(state.nodes);
    if (state.nodes.size() > 1) op.shared_state.push_back(state);
  }
  for (const Value* out : graph.outputs()) {
    const int id = value_ids.at(out);
    op.values[id].is_graph_output = true;
    op.outputs.push_back(id);
  }
  for (auto& value : op.values) SortUnique(value.consumers);
  MarkGradientFree(op, writes);
  MarkSavedValues(op);
  return op;
}

void FillShapes(const CanonicalGraph& canonical, const std::vector<c10::IValue>& model_inputs,
                OpGraph& op) {
  auto probe = canonical.graph->copy();
  const size_t num_outputs = probe->outputs().size();
  // Per probed value: its id, and whether the probe returns the value
  // itself (one output) rather than its size and dtype (two).
  struct Probed {
    int value_id;
    bool whole;
  };
  std::vector<Probed> probed;
  size_t value_id = probe->inputs().size();
  const std::vector<Node*> nodes(probe->nodes().begin(), probe->nodes().end());
  for (Node* node : nodes) {
    for (Value* out : node->outputs()) {
      if (out->type()->kind() == c10::TypeKind::TensorType && node->kind() != c10::prim::Uninitialized) {
        const bool whole = MayBeUninitialized(out);
        if (whole) {
          probe->registerOutput(out);
        } else {
          torch::jit::WithInsertPoint guard(node->next());
          probe->registerOutput(probe->insert(c10::aten::size, {out}));
          probe->registerOutput(probe->insert(c10::prim::dtype, {out}));
        }
        probed.push_back({static_cast<int>(value_id), whole});
      }
      ++value_id;
    }
  }
  std::vector<c10::IValue> results;
  try {
    results = GraphRunner(probe, "shape_probe").Run(canonical.Stack(model_inputs));
  } catch (const mp::Error&) {
    throw;
  } catch (const std::exception& e) {
    const std::string node = DescribeFailingNode(canonical, model_inputs);
    throw InputError(node.empty() ? Concat("the model rejects these inputs: ", ErrorLine(e.what()))
                                  : Concat("the model rejects these inputs at ", node));
  }
  for (size_t i = 0; i < canonical.num_model_inputs; ++i) {
    if (model_inputs[i].isTensor()) SetTensor(op.values[op.inputs[i]], model_inputs[i].toTensor());
  }
  for (size_t i = 0; i < canonical.params.size(); ++i) {
    SetTensor(op.values[op.params[i]], canonical.params[i].tensor);
  }
  size_t at = num_outputs;
  for (const Probed& p : probed) {
    auto& value = op.values[p.value_id];
    if (p.whole) {
      const c10::IValue& result = results[at++];
      if (result.isTensor()) SetTensor(value, result.toTensor());  // else no tensor on this path: 0 bytes
      continue;
    }
    value.shape = results[at++].toIntVector();
    value.dtype = DtypeName(static_cast<c10::ScalarType>(results[at++].toInt()));
    int64_t numel = 1;
    for (int64_t d : value.shape) numel *= d;
    value.bytes = numel * DtypeBytes(value.dtype);
  }
  op.has_shapes = true;
}

}  // namespace mp
