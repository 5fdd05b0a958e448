// CutStages: canonical graph + node->stage map -> standalone stage graphs.
//
// Each stage is built by cloning its nodes, in canonical order, into a new
// graph. Every value a node reads is resolved to the version it would see
// in the uncut graph (see mutation.h):
//   - local:          produced or last written inside this stage;
//   - rematerialized: a constant, a random op's generator, or a list of
//                     constants/inputs, cloned in where read (and only there);
//   - received:       a new stage input keyed (value, version), taken from
//                     the stage that holds that version (an earlier one),
//                     cloned on entry if this stage will write to it.
// A stage exports each (value, version) it holds that another stage or the
// model's output reads; if it writes the value again later, the export is
// a snapshot taken just before that write.
#include "planner/graph/cut.h"

#include <algorithm>
#include <set>
#include <unordered_map>

#include "common/error.h"
#include "planner/graph/run_graph.h"

namespace mp {
namespace {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

bool IsGraphInput(const Value* v) { return v->node()->kind() == c10::prim::Param; }

std::string Describe(const Value* v, int version) {
  return version == 0 ? Concat("%", v->debugName())
                      : Concat("%", v->debugName(), " (after ", version, " in-place writes)");
}

class StageBuilder {
 public:
  StageBuilder(const CanonicalGraph& canonical, const std::vector<int>& stage_of_node, int stage,
               const std::unordered_map<int, std::vector<const Value*>>& written_by)
      : canonical_(canonical), stage_of_node_(stage_of_node), stage_(stage),
        written_by_(written_by), graph_(std::make_shared<Graph>()) {}

  StageGraph Build() {
    FindExports();
    StageGraph result;
    result.index = stage_;
    for (size_t id = 0; id < canonical_.nodes.size(); ++id) {
      if (stage_of_node_[id] != stage_) continue;
      result.nodes.push_back(static_cast<int>(id));
      if (!Rebuilt(canonical_.nodes[id])) CloneNode(static_cast<int>(id));
    }
    for (const auto& key : export_order_) {
      if (!exported_.count(key)) {
        auto it = local_.find(key.value);
        if (it == local_.end() || it->second.version != key.version) {
          throw PlanError(Concat("stage ", stage_, " cannot provide ",
                                 Describe(key.value, key.version),
                                 ": it is written through a view whose base is in another stage; "
                                 "keep the view and its writer in one stage"));
        }
        exported_[key] = it->second.value;
      }
      graph_->registerOutput(exported_.at(key));
      result.outputs.push_back(key);
    }
    result.inputs = inputs_;
    result.graph = graph_;
    return result;
  }

 private:
  struct Local {
    Value* value;
    int version;
  };

  // A node whose every output is rebuilt where it is read (a constant, a
  // generator) is not cloned where it is assigned: a random op's generator
  // run there too would count as one more draw of that op.
  bool Rebuilt(const Node* node) const {
    if (node->outputs().empty()) return false;
    for (const Value* out : node->outputs()) {
      if (!canonical_.mutation.rematerializable.count(out)) return false;
    }
    return true;
  }

  int Holder(const Value* v, int version) const {
    if (version == 0) return IsGraphInput(v) ? -1 : stage_of_node_[canonical_.NodeId(v->node())];
    return stage_of_node_[canonical_.mutation.WritersOf(v)[version - 1]];
  }

  // Every (value, version) this stage holds that a node of another stage,
  // or the model's output, reads.
  void FindExports() {
    std::set<BoundaryValue> seen;
    auto need = [&](const Value* v, int version) {
      if (canonical_.mutation.rematerializable.count(v)) return;
      BoundaryValue key{v, version};
      if (Holder(v, version) == stage_ && seen.insert(key).second) export_order_.push_back(key);
    };
    for (size_t id = 0; id < canonical_.nodes.size(); ++id) {
      if (stage_of_node_[id] == stage_) continue;
      for (const Value* v : OuterInputs(canonical_.nodes[id])) {
        need(v, canonical_.mutation.VersionAt(v, static_cast<int>(id)));
      }
    }
    for (const Value* out : canonical_.graph->outputs()) {
      need(out, canonical_.mutation.FinalVersion(out));
    }
  }

  bool WritesLaterHere(const Value* v, int from_id) const {
    for (int w : canonical_.mutation.WritersOf(v)) {
      if (w >= from_id && stage_of_node_[w] == stage_) return true;
    }
    return false;
  }

  bool ReadByOtherStages(const Value* v) const {
    for (const auto& use : v->uses()) {
      const Node* user = use.user;
      if (user == canonical_.graph->return_node()) return true;
      if (stage_of_node_[canonical_.OwnerId(user)] != stage_) return true;
    }
    return false;
  }

  Value* Copy(Value* v, const Value* original) {
    if (v->type()->kind() == c10::TypeKind::TensorType) {
      return graph_->insert(c10::aten::clone, {v});
    } else if (v->type()->kind() == c10::TypeKind::ListType) {
      return graph_->insert(c10::aten::list, {v});
    } else if (v->type()->kind() == c10::TypeKind::DictType) {
      // dict.copy(): torchvision's IntermediateLayerGetter fills an
      // OrderedDict layer by layer through a segmentation model's backbone.
      return graph_->insert(c10::aten::copy, {v});
    }
    throw PlanError(Concat("stage ", stage_, " writes in place to ", Describe(original, 0),
                           " of type ", v->type()->annotation_str(),
                           ", which cannot be copied at the stage boundary; keep its readers in one stage"));
  }

  Value* Rematerialize(const Value* v) {
    auto it = local_.find(v);
    if (it != local_.end()) return it->second.value;
    Node* node = graph_->createClone(const_cast<Node*>(v->node()), [&](Value* in) {
      return Resolve(in, 0, canonical_.NodeId(v->node()));
    });
    graph_->insertNode(node);
    local_[v] = {node->output(), 0};
    return node->output();
  }

  Value* Resolve(const Value* v, int version, int reader_id) {
    if (canonical_.mutation.rematerializable.count(v)) return Rematerialize(v);
    auto it = local_.find(v);
    if (it != local_.end() && it->second.version == version) return it->second.value;

    const int holder = Holder(v, version);
    if (holder == stage_) {
      // Name the write: the mutation analysis may see one that cannot
      // reach the value (AliasDb's wildcards), and this says which.
      const int writer = canonical_.mutation.WritersOf(v)[version - 1];
      const Node* node = canonical_.nodes[writer];
      const std::string op = WritingOp(node);
      const std::string layer = canonical_.layers[writer];
      throw PlanError(Concat("stage ", stage_, " needs ", Describe(v, version), " which it wrote through a view (node ",
                             writer, ", ", node->kind().toQualString(),
                             op.empty() || op == node->kind().toQualString() ? "" : " writing with " + op,
                             layer.empty() ? "" : " in layer " + layer,
                             "); keep the view's base in this stage"));
    }
    if (holder > stage_) {
      throw PlanError(Concat("stage ", stage_, " (node ", reader_id, ") reads ", Describe(v, version),
                             " from later stage ", holder,
                             "; stages must only read from earlier stages"));
    }
    BoundaryValue key{v, version};
    Value* input = graph_->addInput()->setType(v->type());
    if (v->hasDebugName()) input->setDebugName(v->debugName());
    inputs_.push_back(key);
    Value* local = input;
    // A write here must not reach the sender or other readers of this value.
    if (WritesLaterHere(v, reader_id) && (!IsGraphInput(v) || ReadByOtherStages(v))) {
      local = Copy(input, v);
    }
    local_[v] = {local, version};
    return local;
  }

  // The storage roots a cloned node writes to, including writes made by
  // the nodes of its blocks (an aten::append inside a prim::Loop).
  static void WriteTargets(Node* node, std::set<Value*>& roots) {
    if (const auto* schema = node->maybeSchema()) {
      for (size_t i = 0; i < schema->arguments().size() && i < node->inputs().size(); ++i) {
        const auto* alias = schema->arguments()[i].alias_info();
        if (alias && alias->isWrite()) roots.insert(AliasRoot(node->input(i)));
      }
    }
    for (auto* block : node->blocks()) {
      for (Node* inner : block->nodes()) WriteTargets(inner, roots);
    }
  }

  void CloneNode(int id) {
    Node* original = canonical_.nodes[id];
    auto written = written_by_.find(id);
    // Snapshots of exported versions this write is about to change.
    if (written != written_by_.end()) {
      for (const Value* v : written->second) {
        auto it = local_.find(v);
        if (it == local_.end()) continue;
        BoundaryValue key{v, it->second.version};
        if (std::count(export_order_.begin(), export_order_.end(), key) && !exported_.count(key)) {
          exported_[key] = Copy(it->second.value, v);
        }
      }
    }
    Node* node = graph_->createClone(original, [&](Value* in) {
      return Resolve(in, canonical_.mutation.VersionAt(in, id), id);
    });
    graph_->insertNode(node);
    for (size_t i = 0; i < original->outputs().size(); ++i) {
      local_[original->output(i)] = {node->output(i), 0};
    }
    if (written != written_by_.end()) {
      std::set<Value*> targets;
      WriteTargets(node, targets);
      for (const Value* v : written->second) {
        auto it = local_.find(v);
        if (it == local_.end()) continue;
        if (it->second.version == canonical_.mutation.VersionAt(v, id) &&
            targets.count(AliasRoot(it->second.value))) {
          ++it->second.version;  // the write landed on our copy
        } else {
          local_.erase(it);      // the write went to other storage: this copy is stale
        }
      }
    }
  }

  const CanonicalGraph& canonical_;
  const std::vector<int>& stage_of_node_;
  const int stage_;
  const std::unordered_map<int, std::vector<const Value*>>& written_by_;
  std::shared_ptr<Graph> graph_;
  std::unordered_map<const Value*, Local> local_;
  std::vector<BoundaryValue> inputs_;
  std::vector<BoundaryValue> export_order_;
  std::map<BoundaryValue, Value*> exported_;
};

}  // namespace

std::vector<StageGraph> CutStages(const CanonicalGraph& canonical,
                                  const std::vector<int>& stage_of_node) {
  const size_t n = canonical.nodes.size();
  if (stage_of_node.size() != n) {
    throw PlanError(Concat("cut assigns ", stage_of_node.size(), " nodes, graph has ", n));
  }
  int num_stages = 0;
  for (size_t id = 0; id < n; ++id) {
    if (stage_of_node[id] < 0) throw PlanError(Concat("node ", id, " has no stage"));
    num_stages = std::max(num_stages, stage_of_node[id] + 1);
  }
  std::vector<int> sizes(num_stages, 0);
  for (int s : stage_of_node) ++sizes[s];
  for (int s = 0; s < num_stages; ++s) {
    if (sizes[s] == 0) throw PlanError(Concat("stage ", s, " has no nodes"));
  }
  std::unordered_map<int, std::vector<const Value*>> written_by;
  for (const auto& [value, writers] : canonical.mutation.writers) {
    for (int w : writers) written_by[w].push_back(value);
  }
  std::vector<StageGraph> stages;
  for (int s = 0; s < num_stages; ++s) {
    stages.push_back(StageBuilder(canonical, stage_of_node, s, written_by).Build());
  }
  return stages;
}

std::vector<c10::IValue> RunStages(const CanonicalGraph& canonical,
                                   const std::vector<StageGraph>& stages,
                                   const std::vector<c10::IValue>& model_inputs) {
  std::map<BoundaryValue, c10::IValue> env;
  const auto stack = canonical.Stack(model_inputs);
  for (size_t i = 0; i < stack.size(); ++i) env[{canonical.graph->inputs()[i], 0}] = stack[i];
  for (const auto& stage : stages) {
    std::vector<c10::IValue> inputs;
    for (const auto& key : stage.inputs) {
      auto it = env.find(key);
      if (it == env.end()) {
        throw InternalError(Concat("stage ", stage.index, " input ", Describe(key.value, key.version),
                                   " was not produced by an earlier stage"));
      }
      inputs.push_back(it->second);
    }
    auto outputs = GraphRunner(stage.graph, Concat("stage", stage.index)).Run(std::move(inputs));
    for (size_t i = 0; i < stage.outputs.size(); ++i) env[stage.outputs[i]] = outputs[i];
  }
  std::vector<c10::IValue> results;
  for (const Value* out : canonical.graph->outputs()) {
    BoundaryValue key{out, canonical.mutation.FinalVersion(out)};
    auto it = env.find(key);
    if (it != env.end()) {
      results.push_back(it->second);
    } else if (auto constant = torch::jit::toIValue(out)) {
      results.push_back(*constant);
    } else {
      throw InternalError(Concat("no stage produced model output ", Describe(out, key.version)));
    }
  }
  return results;
}

}  // namespace mp
