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
// input spec or another mode than the one about to be planned; naming
// --batch where `batch_flag` (0: not given) is all that differs.
void CheckProfileMatches(const Profile& profile, const std::string& fingerprint,
                         const std::vector<TensorSpec>& inputs, bool training, const std::string& source,
                         int64_t batch_flag = 0);

// Refuses (InputError naming `source` and the flag) a profile whose times
// are for other devices than the plan's: analytic or calibrated for a
// device profile other than `device_profile_name` (the loaded
// --device-profile's name; empty: none given, the plan is for this
// machine's `local_device`), or measured here while a device profile is
// given. Without it an A100's times would plan CPU workers, and the plan
// would be for neither.
void CheckProfileDevice(const Profile& profile, const std::string& device_profile_name,
                        const std::string& local_device, const std::string& source);

}  // namespace mp
