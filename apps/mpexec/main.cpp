// mpexec: runs an mpplan execution plan. Plan execution arrives with the
// executor (issue 6); until then this main only validates its arguments and
// says so, with a non-zero exit, rather than pretending to run anything.
#include <CLI/CLI.hpp>

#include <filesystem>
#include <iostream>

#include "common/error.h"

int main(int argc, char** argv) {
  CLI::App app{"mpexec: runs an mpplan execution plan with micro-batch pipelining"};
  std::string plan;
  app.add_option("plan", plan, "plan file written by mpplan (.yaml)")->required();
  CLI11_PARSE(app, argc, argv);
  try {
    if (!std::filesystem::exists(plan)) throw mp::InputError(plan + ": no such file");
    throw mp::InputError("plan execution is not implemented in this version of mpexec");
  } catch (const mp::Error& e) {
    std::cerr << "mpexec: " << e.what() << "\n";
    return 1;
  }
}
