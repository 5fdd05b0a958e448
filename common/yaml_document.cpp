// LoadYamlDocument: yaml-cpp's exception as a one-line input error.
#include "common/yaml_document.h"

#include "common/error.h"

namespace mp {

// User text inside a one-line message: control characters become \n, \t, ...
std::string Printable(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      out += Concat("\\x", "0123456789abcdef"[c >> 4], "0123456789abcdef"[c & 15]);
    } else {
      out += char(c);
    }
  }
  return out;
}

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
