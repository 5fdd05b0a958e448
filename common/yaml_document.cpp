// LoadYamlDocument: yaml-cpp's exception as a one-line input error.
#include "common/yaml_document.h"

#include "common/error.h"

namespace mp {

namespace {

// yaml-cpp quotes the offending character in its message: keep the line
// printable (and whole: a NUL would end what() early).
std::string Printable(std::string text) {
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return text;
}

}  // namespace

YAML::Node LoadYamlDocument(const std::string& text, const std::string& source) {
  const size_t nul = text.find('\0');
  if (nul != std::string::npos) {
    throw InputError(Concat(source, ": not a YAML text file (binary data: a NUL byte at offset ", nul, ")"));
  }
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw InputError(Concat(source, ": not valid YAML: ", Printable(e.msg), " (line ", e.mark.line + 1, ")"));
  }
}

}  // namespace mp
