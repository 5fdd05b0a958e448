// What `mpexec PLAN` does: load the plan, run warm-up and timed steps
// (inference or training), optionally verify against the model run whole on
// one device, and write what the user asked for (outputs, trained model,
// trace). The main only parses flags and prints.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "executor/executor.h"

namespace mp {

// torch.utils.benchmark's Timer warms up with at least 2 runs; here the
// first steps grow the heap to its working size and create oneDNN's
// primitives for each new shape.
constexpr int kDefaultWarmup = 2;

struct ExecCommandRequest {
  std::string plan;
  ExecutorOptions options;
  int steps = 1;
  // Untimed steps first (they train too): the first steps pay one-time
  // costs the plan does not predict (docs/executor.md, "Measuring").
  int warmup = kDefaultWarmup;
  bool verify = false;
  bool rescale = false;  // --rescale: scale the predictions by the drift factor
  // --device cpu: run a plan made for other devices on CPU workers anyway
  // (planned_devices.h); without it such a plan is refused.
  bool cpu_workers = false;
  std::string input;    // --input FILE.pt; "": synthetic
  std::string labels;   // --labels FILE.pt; "": synthetic (training)
  std::string output;   // --output FILE.pt (inference)
  std::string save;     // --save FILE.pt (training)
  std::string save_optimizer;  // --save-optimizer FILE.pt (training): the optimizer's state
  std::string load_optimizer;  // --load-optimizer FILE.pt (training): a state --save-optimizer wrote
  std::string trace;    // --trace FILE.json
  int timeout_s = 300;  // --timeout: the longest wait for another rank (stages over processes)
  // The training-only flags given (--optimizer, --lr, --loss, ...): refused with
  // an inference plan, which would ignore them.
  std::vector<std::string> training_flags;
};

// The single JSON object `mpexec --json` prints (docs/executor.md lists the
// fields). Throws InputError for bad requests before any step runs, and the
// runtime's errors as they come. Files are written atomically after the
// steps, never over the plan, its model or an input. Under torchrun's
// environment (WORLD_SIZE > 1) this process runs its rank's stages; rank 0
// returns the object for the whole pipeline, the other ranks null.
nlohmann::json RunExecCommand(const ExecCommandRequest& request);

}  // namespace mp
