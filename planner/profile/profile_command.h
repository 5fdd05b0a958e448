// What `mpplan MODEL --profile-only` does, and what planning will call
// first: load, canonicalise, resolve inputs, then measure the profile
// here, estimate it for a device profile, or read it from a file.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "planner/graph/input_spec.h"
#include "planner/graph/op_graph.h"
#include "planner/graph/output_layout.h"
#include "planner/profile/allreduce_after_step.h"
#include "planner/profile/profile.h"
#include "planner/profile/timer.h"

namespace mp {

struct ProfileRequest {
  std::string model_path;
  std::vector<std::string> input_flags;   // --input, one per model input
  bool training = true;                   // --mode train|infer
  int64_t batch = 0;                      // --batch; 0: the input spec's
  int threads = 0;                        // --threads; 0: DefaultThreads(stages)
  int stages = 1;                         // stages that will share this machine's cores
  bool replica_processes = false;         // and may run as replicas, processes (MeasureOptions)
  std::vector<int64_t> microbatch_sizes;  // empty: DefaultMicrobatchSizes
  TimingOptions timing;
  std::string device = "cpu";             // where to measure
  std::string device_profile;             // name or file: estimate for that device instead
  bool calibrate = false;                 // fit the device profile's efficiencies here first
  std::string profile_in;                 // reuse this profile file
  std::string profile_out;                // write the profile here
  bool progress = true;                   // progress bar on a terminal stderr
  // Called with the sized graph before any profiling, so a request that
  // depends on the graph (a layer split) fails in seconds, not minutes.
  std::function<void(const OpGraph&)> check_graph;
  // Called with the outputs' layout, also before any measuring: throws
  // what the plan cannot run.
  std::function<void(const OutputLayout&)> check_outputs;
  // Measures the links between processes (Profile::process_link and
  // allreduce_link) into a profile measured or read here without them;
  // set by mpplan, whose executor library holds the probe. Unset: not
  // measured.
  std::function<void(Profile&)> measure_links;
  // With measure_links, in training: times the executor's all-reduce after
  // a step of this model (allreduce_after_step.h) into
  // Profile::allreduce_after_step, whenever the links are measured.
  AllReduceProbe measure_allreduce;
};

struct ProfiledModel {
  std::vector<TensorSpec> inputs;         // full batch
  OpGraph graph;                          // with shapes at the full batch
  // The outputs' layout (ProbeOutputs): how inference joins them, and what
  // training trains on.
  OutputLayout outputs;
  Profile profile;
  std::string calibration;                // how an analytic profile was calibrated, or ""
  double load_s = 0;                      // wall time of loading, canonicalising and sizing
  double profiling_s = 0;                 // wall time of measuring (0 when read or estimated)
  // Set when the profile was measured here at the default sizes: measures
  // the graph's nodes at more micro-batch sizes the same way (no coverage,
  // no contention probe), for MergeSizes. Unset for a profile read from a
  // file, estimated for a device profile, or measured at the sizes the
  // user named (--microbatch-sizes).
  std::function<Profile(const std::vector<int64_t>& sizes)> measure_sizes;
};

// Intra-op threads for one stage when `stages` stages share this
// machine's cores: cores / stages, at least 1.
int DefaultThreads(int stages);

// Throws InputError for bad files and flags, and for a --profile-in file
// of another graph, input spec or mode.
ProfiledModel ProfileModel(const ProfileRequest& request);

// Writes `profile` to request.profile_out (atomically, never over the
// model or the profile it read) and returns it as read back, so that
// planning from the file gives the same plan: times to the digits the file
// keeps.
Profile SaveProfile(const ProfileRequest& request, const Profile& profile);

}  // namespace mp
