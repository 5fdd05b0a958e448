// The zoo models the partitioner and fidelity comparisons plan, with the
// batch each is measured at, and the profile both sections share.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "bench/suite/suite.h"

namespace mp::bench {

struct ZooCase {
  std::string name;   // short name: file stems, tables
  std::string file;   // under suite.models
  std::string input;  // mpplan flags for the batch (--batch or --input)
};

// Every zoo model that trains (InPlace cannot: eager PyTorch refuses its
// backward too; Toy is a 3-node test fixture), at batches that take tens
// to hundreds of ms per step here. A smoke run: two small ones.
std::vector<ZooCase> ZooCases(const Suite& suite);

// Profiles `c` once per run for 2 CPU workers (OUT/NAME.profile.yaml) and
// returns mpplan's JSON for that first plan (its choice for 2 devices),
// whose `timing` is the planner-speed figures.
const nlohmann::json& ZooProfile(const Suite& suite, const ZooCase& c);

// mpplan flags that reuse that profile.
std::string ReuseProfile(const Suite& suite, const ZooCase& c);

}  // namespace mp::bench
