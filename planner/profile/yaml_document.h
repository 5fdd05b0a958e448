// Parsing a YAML document we were handed (a device profile, a profile
// file), with a parse error turned into one InputError line.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

namespace mp {

// Throws InputError "SOURCE: not valid YAML: MESSAGE (line N)".
YAML::Node LoadYamlDocument(const std::string& text, const std::string& source);

}  // namespace mp
