// Test helper: `mpplan ARGS` run in the test's own process (RunMpplan, the
// function mpplan's main is), its status and its stdout and stderr
// together, as run_tool.h's RunTool gives them for the binary. A test that
// makes many plans spares each one LibTorch's start, which is most of a
// planned-for-A100s mpplan's time (0.7 s of CPU, 3 s under ASan).
// test_errors and the bench smoke run still run the binary itself.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "apps/mpplan/run_mpplan.h"
#include "run_tool.h"

namespace mp::test {

// `args` as a shell would split them: words apart at spaces, '...' kept
// whole (all the quoting the tests use).
inline std::vector<std::string> SplitArgs(const std::string& args) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false, quoted = false;
  for (char c : args) {
    if (c == '\'') {
      quoted = !quoted, in_word = true;
    } else if (c == ' ' && !quoted) {
      if (in_word) words.push_back(word);
      word.clear(), in_word = false;
    } else {
      word += c, in_word = true;
    }
  }
  if (quoted) throw std::invalid_argument("unbalanced quote in: " + args);
  if (in_word) words.push_back(word);
  return words;
}

inline ToolRun MpplanInProcess(const std::string& args) {
  std::ostringstream out;
  ToolRun run;
  run.status = RunMpplan(SplitArgs(args), out, out);
  run.out = out.str();
  return run;
}

}  // namespace mp::test
