// LoadYamlDocument: yaml-cpp's exception as a one-line input error.
#include "planner/profile/yaml_document.h"

#include "common/error.h"

namespace mp {

YAML::Node LoadYamlDocument(const std::string& text, const std::string& source) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw InputError(Concat(source, ": not valid YAML: ", e.msg, " (line ", e.mark.line + 1, ")"));
  }
}

}  // namespace mp
