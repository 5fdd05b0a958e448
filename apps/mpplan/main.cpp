// mpplan: plans pipeline-parallel execution of a TorchScript model.
// This main parses flags, calls one library function and turns mp::Error
// into one line on stderr and a non-zero exit.
#include <CLI/CLI.hpp>

#include <iostream>

#include "common/error.h"
#include "planner/inspect/inspect.h"

int main(int argc, char** argv) {
  CLI::App app{"mpplan: ahead-of-time pipeline planner for TorchScript models"};
  app.footer(
      "Examples:\n"
      "  mpplan build/models/resnet50.script.pt --inspect\n"
      "  mpplan model.pt --inspect --json --input float32[4,3,64,64]\n"
      "  mpplan gpt.pt --inspect --input int64[8,32]");
  std::string model;
  bool inspect = false;
  bool json = false;
  std::vector<std::string> inputs;
  app.add_option("model", model, "TorchScript model file (.pt)")->required();
  app.add_flag("--inspect", inspect, "print the canonical graph summary");
  app.add_flag("--json", json, "print one JSON object instead of text");
  app.add_option("--input", inputs,
                 "input spec dtype[d0,d1,...], once per model input in order "
                 "(default: the spec embedded in the model)")
      ->take_last()
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  CLI11_PARSE(app, argc, argv);

  try {
    if (!inspect) {
      throw mp::InputError("planning is not available yet; use --inspect to see the canonical graph");
    }
    const mp::GraphSummary summary = mp::InspectModel(model, inputs);
    if (json) {
      std::cout << mp::SummaryToJson(summary).dump() << "\n";
    } else {
      std::cout << mp::FormatSummary(summary);
    }
  } catch (const mp::Error& e) {
    std::cerr << "mpplan: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "mpplan: internal error: " << e.what() << "\n";
    return 3;
  }
  return 0;
}
