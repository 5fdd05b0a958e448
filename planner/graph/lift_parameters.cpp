// LiftParameters: module attributes -> graph inputs and constants.
//
// A TorchScript method reads its weights through chains of prim::GetAttr
// from `self`. A stage of a pipeline must instead receive its weights as
// explicit inputs, so that it can be placed on a device, handed to autograd
// and cut out of the graph on its own. We walk every block in order, follow
// each chain through the module's object tree, and replace the attribute
// read with a graph input (tensors), a ListConstruct of inputs (tensor
// lists) or a constant (everything else).
#include "planner/graph/lift_parameters.h"

#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include <unordered_map>

#include "common/error.h"
#include "planner/graph/script_class_name.h"

namespace mp {
namespace {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

struct Lifter {
  Graph& graph;
  std::vector<LiftedTensor> lifted;
  std::unordered_map<const c10::TensorImpl*, Value*> input_of_tensor;
  // An object reached through GetAttr: the IValue and its qualified path.
  std::unordered_map<const Value*, std::pair<c10::IValue, std::string>> objects;

  Value* InputFor(const at::Tensor& tensor, const std::string& path, bool is_parameter) {
    auto it = input_of_tensor.find(tensor.unsafeGetTensorImpl());
    if (it != input_of_tensor.end()) return it->second;
    // An unshaped type: the fingerprint must not depend on where the weights live.
    Value* input = graph.addInput()->setType(c10::TensorType::get());
    input->setDebugName(path);
    input_of_tensor[tensor.unsafeGetTensorImpl()] = input;
    lifted.push_back({path, tensor, is_parameter});
    return input;
  }

  // Element names of a tensor list: nn.LSTM/GRU keep them in _flat_weights_names.
  static std::vector<std::string> ElementNames(const c10::ivalue::Object& owner,
                                               const std::string& owner_path,
                                               const std::string& attr, size_t n) {
    std::vector<std::string> names;
    if (attr == "_flat_weights" && owner.type()->hasAttribute("_flat_weights_names")) {
      for (const auto& name : owner.getAttr("_flat_weights_names").toListRef()) {
        names.push_back(owner_path + name.toStringRef());
      }
    }
    if (names.size() != n) {
      names.clear();
      for (size_t i = 0; i < n; ++i) names.push_back(Concat(owner_path, attr, "[", i, "]"));
    }
    return names;
  }

  Value* ListFor(const c10::IValue& list, const c10::ivalue::Object& owner,
                 const std::string& owner_path, const std::string& attr, const c10::TypePtr& type) {
    const auto& elements = list.toListRef();
    auto names = ElementNames(owner, owner_path, attr, elements.size());
    std::vector<Value*> items;
    for (size_t i = 0; i < elements.size(); ++i) {
      items.push_back(InputFor(elements[i].toTensor(), names[i], true));
    }
    // Inputs are visible everywhere, so the list is built once at the top.
    torch::jit::WithInsertPoint guard(graph.block()->nodes().front());
    auto elem_type = type->castRaw<c10::ListType>()->getElementType();
    Node* construct = graph.insertNode(graph.createList(elem_type, items));
    return construct->output();
  }

  void Lift(Node* node) {
    auto parent = objects.find(node->input(0));
    if (parent == objects.end()) return;  // GetAttr on something that is not a module
    const auto& [owner_value, owner_path] = parent->second;
    const auto& owner = *owner_value.toObject();
    const std::string attr = node->s(c10::attr::name);
    const std::string path = owner_path + attr;
    c10::IValue value = owner.getAttr(attr);
    Value* replacement = nullptr;
    if (value.isObject()) {
      objects[node->output()] = {value, path + "."};
      return;
    } else if (value.isTensor()) {
      auto slot = owner.type()->findAttributeSlot(attr);
      bool is_parameter = slot && owner.type()->is_parameter(*slot);
      replacement = InputFor(value.toTensor(), path, is_parameter);
    } else if (value.isList() && node->output()->type()->cast<c10::ListType>() &&
               node->output()->type()->castRaw<c10::ListType>()->getElementType()->kind() ==
                   c10::TypeKind::TensorType) {
      replacement = ListFor(value, owner, owner_path, attr, node->output()->type());
    } else {
      torch::jit::WithInsertPoint guard(node);
      auto constant = graph.insertConstant(value);
      if (!constant) {
        throw InputError(Concat("model attribute '", path, "' of type ",
                                value.type()->repr_str(), " cannot be made a constant"));
      }
      replacement = constant;
    }
    node->output()->replaceAllUsesWith(replacement);
  }

  // Throws if a module object reached through GetAttr is still used after
  // dead-code elimination. EliminateDeadCode frees the nodes it removes, so
  // the survivors are looked up from the graph, never through the keys of
  // `objects` (which may dangle).
  void CheckNoModuleValues(Block* block) const {
    for (Node* node : block->nodes()) {
      for (Value* output : node->outputs()) {
        auto it = objects.find(output);
        if (it != objects.end() && !output->uses().empty()) {
          throw InputError(Concat("model uses submodule '", it->second.second, "' as a value (in ",
                                  output->uses()[0].user->kind().toQualString(),
                                  "); mpplan cannot lift it to tensors"));
        }
      }
      for (Block* sub : node->blocks()) CheckNoModuleValues(sub);
    }
  }

  void Walk(Block* block) {
    for (Node* node : block->nodes()) {
      if (node->kind() == c10::prim::SetAttr) {
        const auto cls = node->input(0)->type()->cast<c10::ClassType>();
        if (cls && !cls->is_module()) {  // context managers are gone (RewriteContextManagers)
          throw InputError(Concat("model's forward assigns attribute '", node->s(c10::attr::name), "' of a ",
                                  ScriptClassName(*cls), " object (prim::SetAttr); mpplan needs a forward that "
                                  "keeps no state in TorchScript class objects"));
        }
        throw InputError(Concat("model assigns module attribute '", node->s(c10::attr::name),
                                "' in forward (prim::SetAttr); mpplan needs a forward "
                                "without module state changes"));
      }
      if (node->kind() == c10::prim::GetAttr) Lift(node);
      for (Block* sub : node->blocks()) Walk(sub);
    }
  }
};

}  // namespace

std::vector<LiftedTensor> LiftParameters(Graph& graph, const torch::jit::Module& module) {
  Value* self = graph.inputs().at(0);
  Lifter lifter{graph, {}, {}, {}};
  lifter.objects[self] = {module._ivalue(), ""};
  lifter.Walk(graph.block());
  // Drop the now-dead GetAttr chains; anything still using a module object
  // means forward needs the module itself, which a stage cannot carry.
  torch::jit::EliminateDeadCode(graph.block());
  lifter.CheckNoModuleValues(graph.block());
  if (!self->uses().empty()) {
    throw InputError(Concat("model uses `self` as a value (in ",
                            self->uses()[0].user->kind().toQualString(), ")"));
  }
  graph.eraseInput(0);
  return lifter.lifted;
}

}  // namespace mp
