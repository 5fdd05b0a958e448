// ScriptClassName: the qualified name without the compiler's __torch__.
#include "planner/graph/script_class_name.h"

namespace mp {

std::string ScriptClassName(const c10::ClassType& cls) {
  const std::string name = cls.name() ? cls.name()->qualifiedName() : cls.str();
  const std::string prefix = "__torch__.";
  return name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
}

}  // namespace mp
