// Test helper: `mpexec ARGS --verify --json` on CPU workers, in the test's
// own process (mpexec_in_process.h): the run's JSON, checked to have ended
// where one device ends: losses, and the state (SGD) or the first step's
// gradients (Adam, AdamW), within 1e-5 of the same micro-batches trained
// there.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "tests/doctest_torch.h"
#include "../mpexec_in_process.h"

namespace mp::test {

inline nlohmann::json VerifiedTraining(const std::string& args) {
  const ToolRun run = MpexecCpuInProcess(args + " --verify --json");
  INFO(run.out);
  REQUIRE(run.status == 0);
  const auto j = nlohmann::json::parse(run.out);
  CHECK(j["verify"] == true);
  CHECK(j["verify_detail"]["max_loss_relative_diff"].get<double>() <= 1e-5);
  // SGD is judged on the state, Adam(W) on the first step's gradients
  // (exec_command.cpp, VerifyTraining).
  const bool sgd = j["optimizer"]["name"] == "sgd" || j["optimizer"]["name"] == "momentum";
  CHECK(j["verify_detail"]["judged_on"] == (sgd ? "state" : "gradients"));
  CHECK(j["verify_detail"][sgd ? "max_state_relative_diff" : "max_gradient_relative_diff"].get<double>() <= 1e-5);
  return j;
}

}  // namespace mp::test
