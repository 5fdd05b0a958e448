// mpplan's command line, whole: what the binary does with its arguments.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace mp {

// Runs `mpplan ARGS...` (the arguments after the program's name): the
// report, JSON or help on `out`, a failure's one line on `err`. Returns the
// exit status (docs/errors.md).
int RunMpplan(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace mp
