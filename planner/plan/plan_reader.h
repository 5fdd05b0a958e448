// Reading a plan back, with validation: the one reader mpplan's tests and
// mpexec share. Every problem is one InputError line naming the file and
// the key path: `plan.yaml: stages[1].nodes[0]: node 912 is out of range
// (the graph has 458 nodes)`.
#pragma once

#include <string>

#include "planner/graph/op_graph.h"
#include "planner/plan/plan.h"

namespace mp {

// Parses and checks what the plan alone can tell: unknown or missing keys,
// wrong types, an unknown format version, mode, schedule or dtype, M < 1 or
// M > batch, node ids out of range, a node in two stages or in none, stage
// ids out of order, devices out of range, a stage receiving from a later
// stage (or sending to an earlier one), actions that do not parse or do not
// form a runnable schedule. `source` names the document in errors.
Plan ParsePlan(const std::string& yaml, const std::string& source);

// Reads `path` and parses it (InputError when it cannot be read or is not YAML).
Plan ReadPlan(const std::string& path);

// Checks a plan against the canonical graph of its model: the node count,
// the fingerprint, that no stage reads a value produced by a node of a
// later stage, and that every tensor listed as sent or received is a value
// of the graph (id and name). The lists themselves are what the planner
// costed; the executor derives its transfers from the graph and the node
// assignment, so it never trusts a hand-edited list.
void CheckPlanAgainstGraph(const Plan& plan, const OpGraph& graph, const std::string& source);

}  // namespace mp
