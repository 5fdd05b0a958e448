// What mpexec prints without --json: the step measured against the plan's
// prediction and band, the drift reference, each stage's busy time, memory,
// the loss and --verify's verdict, from RunExecCommand's JSON object.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace mp {

std::string FormatExecReport(const nlohmann::json& result);

}  // namespace mp
