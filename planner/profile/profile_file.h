// Profile files: a Profile as YAML (--profile-out) and back (--profile-in),
// keyed by the graph fingerprint, input spec, mode, device and threads so
// a profile is never applied to a model it was not taken on.
#pragma once

#include <string>
#include <vector>

#include "planner/graph/input_spec.h"
#include "planner/profile/profile.h"

namespace mp {

inline constexpr const char* kProfileFormat = "mpplan-profile/v1";

std::string ProfileToYaml(const Profile& profile);

// Throws InputError naming `source` and the key for malformed documents.
Profile ProfileFromYaml(const std::string& yaml, const std::string& source);

// Refuses (InputError naming `source`) a profile of another graph, another
// input spec or another mode than the one about to be planned.
void CheckProfileMatches(const Profile& profile, const std::string& fingerprint,
                         const std::vector<TensorSpec>& inputs, bool training, const std::string& source);

}  // namespace mp
