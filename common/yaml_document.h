// Parsing a YAML document we were handed (a device profile, a profile
// file), with a parse error turned into one InputError line.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

namespace mp {

// User text inside a one-line message: control characters become \n, \t,
// \x01, ... (yaml-cpp quotes the offending character in its messages).
std::string Printable(const std::string& text);

// Throws InputError "SOURCE: not valid YAML: MESSAGE (line N)".
YAML::Node LoadYamlDocument(const std::string& text, const std::string& source);

// Writes `items` as one flow-style list: [1, 2, 3].
template <typename T>
void EmitFlowSeq(YAML::Emitter& out, const std::vector<T>& items) {
  out << YAML::Flow << YAML::BeginSeq;
  for (const auto& item : items) out << item;
  out << YAML::EndSeq;
}

}  // namespace mp
