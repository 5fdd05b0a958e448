// The profile as a person reads it (a per-layer table) and as a script
// reads it (the `profile` object of mpplan's JSON output).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "planner/profile/profile.h"

namespace mp {

// Header (source, device, threads, sizes, coverage) and a table of the
// top-level layers: nodes, forward ms at each size, backward ms at the
// largest, GFLOP, parameter MiB and activation KiB per sample.
std::string FormatProfile(const Profile& profile, const std::string& calibration, double profiling_s);

// {source, device, mode, threads, batch, microbatch_sizes, coverage,
//  backward_coverage, whole_forward_ms, whole_backward_ms, node_forward_ms,
//  node_backward_ms, flops, profiling_s, calibration, layers: [...]}
nlohmann::json ProfileSummaryJson(const Profile& profile, const std::string& calibration, double profiling_s);

}  // namespace mp
