// The drift reference: a fixed piece of work (a matrix product and
// elementwise arithmetic over a MiB, about a millisecond on one core)
// timed between the profiler's passes and again by mpexec just before it
// runs a plan. On a shared machine the same model profiles faster or slower
// from one minute to the next; the reference moves with the machine, not
// with the model, so its time at profiling against its time at the run says
// how much faster or slower the machine is now (docs/profile.md).
#pragma once

#include <c10/core/Device.h>

#include <functional>
#include <memory>

namespace mp {

class DriftReference {
 public:
  // Allocates the operands on `device` and runs the work once, untimed.
  explicit DriftReference(c10::Device device);
  ~DriftReference();
  // Milliseconds of one run of the work, after an untimed one, the device
  // synchronised around it.
  double TimeMs();

 private:
  struct Operands;
  std::unique_ptr<Operands> operands_;
  std::function<void()> sync_;
};


}  // namespace mp
