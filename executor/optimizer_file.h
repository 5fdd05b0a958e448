// The optimizer's state in a file, so a run resumed from a checkpoint
// (mpexec --model, which --save wrote) goes on with Adam's moments or SGD's
// momentum where the last one left them, as torch.optim's
// load_state_dict does. The file is what torch.save writes of
// {"optimizer": NAME, "state": {parameter name: Optimizer::StateOf}}: by
// name, not by index, so Python reads it as it is.
#pragma once

#include <string>
#include <vector>

#include "executor/optimizer.h"
#include "planner/graph/canonical_graph.h"

namespace mp {

// Every parameter's state that has one; never over `protected_paths`.
void SaveOptimizerState(const std::string& path, const Optimizer& optimizer, const CanonicalGraph& canonical,
                        const std::vector<std::string>& protected_paths);

// Sets the state of the parameters `held` marks (empty: all) from `path`.
// InputError naming --load-optimizer, the file and what does not fit: a
// file for another optimizer, a parameter the model has not, a tensor
// shaped otherwise.
void LoadOptimizerState(const std::string& path, Optimizer& optimizer, const CanonicalGraph& canonical,
                        const std::vector<bool>& held = {});

}  // namespace mp
