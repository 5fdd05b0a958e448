// How fast the machine is now against when the plan's profile was taken:
// the drift reference (planner/profile/drift_reference.h) timed again
// between the steps mpexec runs, on the profile's device with its thread
// count. mpexec scales the plan's predictions by the ratio of the medians,
// so a profile taken in a slow stretch of a shared machine is not read as
// a slow plan. Samples between the steps, not in a row before them: a slow
// stretch of this machine lasts about as long as a row of samples would.
#pragma once

#include <memory>
#include <vector>

#include "planner/plan/plan.h"
#include "planner/profile/drift_reference.h"

namespace mp {

struct Drift {
  double factor = 1;      // now / when profiled; 1 when not measured
  double now_ms = 0;      // the reference's median now
  bool measured = false;  // false: the plan has no reference (a device profile's
                          // estimates), or its device is not here
};

class DriftProbe {
 public:
  explicit DriftProbe(const Plan& plan);
  ~DriftProbe();
  // Times the reference `samples` times; nothing when the plan has none.
  void Sample(int samples = 1);
  Drift Result() const;

 private:
  const Plan& plan_;
  std::unique_ptr<DriftReference> reference_;
  std::vector<double> samples_;
};

}  // namespace mp
