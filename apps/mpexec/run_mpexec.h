// mpexec's command line, whole: what the binary does with its arguments.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace mp {

// Runs `mpexec ARGS...` (the arguments after the program's name): the
// report, JSON or help on `out`, a failure's one line on `err` (or, in a
// rank the launcher started, handed to the launcher). `self` is the mpexec
// binary that --launch-local starts once per rank. Returns the exit status
// (docs/errors.md).
int RunMpexec(const std::vector<std::string>& args, std::ostream& out, std::ostream& err, const std::string& self);

}  // namespace mp
