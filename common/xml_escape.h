// Text inside SVG or other XML: the five characters XML reserves become
// entities, so a layer name or a legend never breaks the document.
#pragma once

#include <string>

namespace mp {

inline std::string XmlEscape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace mp
