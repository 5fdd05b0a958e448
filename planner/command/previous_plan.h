// The plan a new one replaces (mpplan --previous): read before profiling,
// then matched against what is being planned, so that its shape can be
// kept while it stays a tie (PlanRequest::previous). By default it is the
// plan about to be overwritten: a user who plans one model twice on one
// machine gets one plan, unless the machine or the model really changed.
#pragma once

#include <optional>
#include <string>

#include "planner/plan/plan.h"

namespace mp {

struct PreviousPlan {
  std::string path;
  bool named = false;  // given as --previous FILE: a file that does not fit is an error
  Plan plan;
};

// `flag`: "" (the default: `output`, where it exists and reads as a plan),
// "none" (no previous plan) or a plan file, which must read as one
// (InputError naming it otherwise).
std::optional<PreviousPlan> ReadPreviousPlan(const std::string& flag, const std::string& output);

// The previous plan's shape (replicas, stages, chunks, micro-batches,
// schedule), where it was planned for what `now` is planned for: the same
// canonical graph (model.graph_fingerprint), mode, batch, number and type
// of devices (name and memory limit), and profile source, device and
// threads. Otherwise nullopt, or, for a named file, InputError naming the
// first difference ("--previous old.plan.yaml: planned for batch 64, this
// plan's is 32").
std::optional<PlanCandidate> PreviousShape(const PreviousPlan& previous, const Plan& now);

}  // namespace mp
