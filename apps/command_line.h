// Command-line parsing shared by the mains: CLI11's own parse errors (an
// unknown flag, a value that is not a number, a missing argument) become one
// line on stderr, like every other error, instead of CLI11's two.
#pragma once

#include <CLI/CLI.hpp>

#include <iostream>
#include <optional>
#include <string>

namespace mp {

// Parses argv into `app`. Returns the exit status when the command should
// stop here: 0 after --help (printed on `out`), 2 after a parse error
// printed on `err` as "TOOL: MESSAGE (see TOOL --help)"; nothing when it
// should go on.
inline std::optional<int> ParseCommandLine(CLI::App& app, int argc, const char* const* argv, const std::string& tool,
                                           std::ostream& out = std::cout, std::ostream& err = std::cerr) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e, out, err);  // --help
    std::string message = e.what();
    for (char& c : message) {
      if (c == '\n') c = ' ';
    }
    // A flag given twice (`--gpus 2 ... --gpus 4`): CLI11 says "--gpus: At
    // Most 1 required but received 2", which names no mistake a user made.
    const std::string at_most = ": At Most 1 required but received ";
    const size_t at = message.find(at_most);
    if (at != std::string::npos) {
      message = message.substr(0, at) + " given " + message.substr(at + at_most.size()) + " times; give it once";
    }
    err << tool << ": " << message << " (see " << tool << " --help)\n";
    return 2;
  }
  return std::nullopt;
}

}  // namespace mp
