// RunTool: the one place a main's failures become exit statuses, as
// docs/errors.md lists them: a bad input, a plan that cannot be made or
// any other mp::Error exits 1 with its one line; an InternalError, or any
// exception that is not ours (a LibTorch error: its first line, without the
// interpreter's banner), exits 3 as an internal error. The body's own
// status passes through (0, or mpexec's 4 for a --verify mismatch); 2 is
// ParseCommandLine's (apps/command_line.h).
#pragma once

#include <exception>
#include <functional>
#include <string>

#include "common/error.h"
#include "planner/graph/run_graph.h"

namespace mp {

// `report` prints the line (with the tool's prefix) or hands it on.
inline int RunTool(const std::function<int()>& body, const std::function<void(const std::string&)>& report) {
  try {
    return body();
  } catch (const InternalError& e) {
    report(std::string("internal error: ") + e.what());
    return 3;
  } catch (const Error& e) {
    report(e.what());
    return 1;
  } catch (const std::exception& e) {
    report("internal error: " + ErrorLine(e.what()));
    return 3;
  }
}

}  // namespace mp
