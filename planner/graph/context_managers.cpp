// RewriteContextManagers (context_managers.h). For each no_grad,
// record_function or autocast object of the inlined graph, in graph order:
//   1. find its uses: __init__'s SetAttrs, and pairs of a prim::Enter and
//      the next prim::Exit in the same block (one object may serve several
//      `with` statements); anything else is refused; autocast's `_enabled`
//      must be a constant false;
//   2. no_grad only: a body is every node between an Enter and its Exit,
//      with their blocks; each tensor a body node (or a body block's
//      return) reads from outside the body, or from a prim::GetAttr inside
//      it, is read through one aten::detach (placed after Enter, or after
//      that GetAttr); if the body read a container of tensors from
//      outside, its tensor results used after Exit are read through a
//      detach placed at Exit;
//   3. the Enters, Exits, SetAttrs and the object go.
// Detach shares storage and version counter with what it reads, so a
// no_grad body's in-place writes land where they did, and autograd refuses
// what it would have refused there.
#include "planner/graph/context_managers.h"

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/error.h"
#include "planner/graph/script_class_name.h"

namespace mp {

namespace {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

enum class Manager { kNone, kNoGrad, kRecordFunction, kAutocast };

bool NameEndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Manager ManagerOf(const Node* node) {
  if (node->kind() != c10::prim::CreateObject) return Manager::kNone;
  const auto cls = node->output()->type()->cast<c10::ClassType>();
  if (!cls) return Manager::kNone;
  const std::string name = ScriptClassName(*cls);
  if (NameEndsWith(name, "torch.autograd.grad_mode.no_grad")) return Manager::kNoGrad;
  if (NameEndsWith(name, "torch.autograd.profiler.record_function")) return Manager::kRecordFunction;
  if (NameEndsWith(name, "amp.autocast_mode.autocast")) return Manager::kAutocast;
  return Manager::kNone;
}

bool IsTensorValue(const Value* v) { return v->type()->cast<c10::TensorType>() != nullptr; }

// A list, tuple, dict or optional with a tensor inside; not a module, whose
// attributes the body reads through prim::GetAttr, each detached there.
bool ContainerHoldsTensor(const c10::TypePtr& type) {
  if (type->cast<c10::TensorType>()) return true;
  if (type->cast<c10::ClassType>()) return false;
  for (const auto& contained : type->containedTypes())
    if (ContainerHoldsTensor(contained)) return true;
  return false;
}

// The node whose run makes `v`: its own node, or for a block's input the
// node owning that block (null for the graph's inputs).
const Node* MakingNode(const Value* v) {
  const Node* node = v->node();
  return node->kind() == c10::prim::Param ? node->owningBlock()->owningNode() : node;
}

void CollectBody(Block* block, std::vector<Node*>& out) {
  for (Node* node : block->nodes()) {
    out.push_back(node);
    for (Block* sub : node->blocks()) CollectBody(sub, out);
  }
  out.push_back(block->return_node());
}

class BodyRewrite {
 public:
  BodyRewrite(Graph& graph, Node* enter, Node* exit) : graph_(graph), enter_(enter), exit_(exit) {
    for (Node* node = enter->next(); node != exit; node = node->next()) {
      nodes_.push_back(node);
      for (Block* sub : node->blocks()) CollectBody(sub, nodes_);
    }
    body_.insert(nodes_.begin(), nodes_.end());
  }

  void Run() {
    for (Node* node : nodes_) {
      for (size_t i = 0; i < node->inputs().size(); ++i) {
        Value* in = node->input(i);
        const bool inside = body_.count(MakingNode(in)) > 0;
        if (IsTensorValue(in) && (!inside || in->node()->kind() == c10::prim::GetAttr)) {
          node->replaceInput(i, Detached(in, node));
        } else if (!inside && ContainerHoldsTensor(in->type())) {
          reads_container_ = true;
        }
      }
    }
    if (reads_container_) DetachResults();
  }

 private:
  Value* Detached(Value* v, Node* user) {
    auto it = detached_.find(v);
    if (it != detached_.end()) return it->second;
    Node* detach = graph_.create(c10::aten::detach, {v}, 1);
    detach->output()->setType(v->type());
    detach->copyMetadata(user);
    detach->insertAfter(body_.count(MakingNode(v)) ? v->node() : enter_);
    return detached_[v] = detach->output();
  }

  // The body's tensor results that code after it reads, each through one
  // detach at Exit.
  void DetachResults() {
    for (Node* node = enter_->next(); node != exit_; node = node->next()) {
      for (Value* out : node->outputs()) {
        if (!IsTensorValue(out)) continue;
        Node* detach = nullptr;
        const std::vector<torch::jit::Use> uses = out->uses();  // a copy: the loop rewrites them
        for (const auto& use : uses) {
          if (body_.count(use.user) || IsBodyDetach(use.user)) continue;
          if (!detach) {
            detach = graph_.create(c10::aten::detach, {out}, 1);
            detach->output()->setType(out->type());
            detach->copyMetadata(node);
            detach->insertAfter(exit_);
          }
          use.user->replaceInput(use.offset, detach->output());
        }
      }
    }
  }

  bool IsBodyDetach(const Node* node) const {
    for (const auto& entry : detached_)
      if (entry.second->node() == node) return true;
    return false;
  }

  Graph& graph_;
  Node* enter_;
  Node* exit_;
  std::vector<Node*> nodes_;
  std::unordered_set<const Node*> body_;
  std::unordered_map<Value*, Value*> detached_;
  bool reads_container_ = false;
};

[[noreturn]] void RefuseUse(const Node* object, const std::string& what) {
  throw InputError(Concat("model's forward uses ", ScriptClassName(*object->output()->type()->expect<c10::ClassType>()),
                          " ", what, "; mpplan takes a `with` around statements of one block"));
}

// Whether autocast's __init__ set `_enabled` to a constant false.
bool AutocastOff(const std::vector<Node*>& set_attrs) {
  for (const Node* set_attr : set_attrs) {
    if (set_attr->s(c10::attr::name) != "_enabled") continue;
    const auto value = torch::jit::toIValue(set_attr->input(1));
    return value && value->isBool() && !value->toBool();
  }
  return false;
}

// The first Exit of `object` after `enter` in its block, or null.
Node* ExitOf(Node* enter, const Value* object) {
  for (Node* node = enter->next(); node != enter->owningBlock()->return_node(); node = node->next()) {
    if (node->kind() == c10::prim::Exit && node->input(0) == object) return node;
  }
  return nullptr;
}

void RewriteObject(Graph& graph, Node* object, Manager manager) {
  std::vector<Node*> enters, exits, set_attrs;
  for (const auto& use : object->output()->uses()) {
    Node* user = use.user;
    if (user->kind() == c10::prim::SetAttr) {
      set_attrs.push_back(user);
    } else if (user->kind() == c10::prim::Enter) {
      enters.push_back(user);
    } else if (user->kind() == c10::prim::Exit) {
      exits.push_back(user);
    } else {
      RefuseUse(object, Concat("with the object passed to ", user->kind().toQualString()));
    }
  }
  // One object may serve several `with` statements (g = torch.no_grad()).
  std::vector<std::pair<Node*, Node*>> pairs;
  for (Node* enter : enters) {
    Node* exit = ExitOf(enter, object->output());
    if (!exit) RefuseUse(object, "without its exit in the same block");
    if (enter->output()->hasUses() || exit->output()->hasUses()) RefuseUse(object, "with `as` naming its value");
    for (const auto& pair : pairs)
      if (pair.second == exit) RefuseUse(object, "nested in itself");
    pairs.emplace_back(enter, exit);
  }
  if (pairs.size() != exits.size()) RefuseUse(object, "with an exit that has no enter in its block");
  if (manager == Manager::kAutocast && !AutocastOff(set_attrs)) {
    throw InputError("model's forward uses autocast that may be enabled; mpplan runs every op in the model's "
                     "own dtypes (cast the model, or keep autocast(enabled=False) regions only)");
  }
  for (const auto& [enter, exit] : pairs) {
    if (manager == Manager::kNoGrad) BodyRewrite(graph, enter, exit).Run();
    enter->destroy();
    exit->destroy();
  }
  for (Node* set_attr : set_attrs) set_attr->destroy();
  object->destroy();
}

// The objects of the managers it takes; refuses a `with` on anything else
// (a class of the user's own with __enter__ and __exit__, an object kept
// as a module attribute).
void FindObjects(Block* block, std::vector<Node*>& out) {
  for (Node* node : block->nodes()) {
    if (ManagerOf(node) != Manager::kNone) out.push_back(node);
    if (node->kind() == c10::prim::Enter && ManagerOf(node->input(0)->node()) == Manager::kNone) {
      const auto cls = node->input(0)->type()->cast<c10::ClassType>();
      throw InputError(Concat("model's forward uses ", cls ? ScriptClassName(*cls) : node->input(0)->type()->str(),
                              " as a context manager; mpplan takes torch.no_grad(), record_function "
                              "and autocast(enabled=False)"));
    }
    for (Block* sub : node->blocks()) FindObjects(sub, out);
  }
}

}  // namespace

int RewriteContextManagers(Graph& graph) {
  std::vector<Node*> objects;
  FindObjects(graph.block(), objects);
  for (Node* object : objects) RewriteObject(graph, object, ManagerOf(object));
  return static_cast<int>(objects.size());
}

}  // namespace mp
