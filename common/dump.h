// Debug dumps by name, as PyTorch's GRAPH_DUMP: `MP_DUMP=canonical mpplan
// model.pt` prints the canonical graph to stderr. MP_DUMP is a comma-
// separated list of step names, or `all`. Names so far: canonical, probe (the
// contention probe's turns: alone, on each worker's cores when pinned, then
// k at once, in ms).
#pragma once

#include <cstdlib>
#include <string>

namespace mp {

inline bool DumpRequested(const std::string& name) {
  const char* env = std::getenv("MP_DUMP");
  if (!env) return false;
  const std::string list = std::string(",") + env + ",";
  return list.find("," + name + ",") != std::string::npos || list.find(",all,") != std::string::npos;
}

}  // namespace mp
