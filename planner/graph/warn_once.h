// A model's warnings, printed once a process. The TorchScript interpreter
// skips a `warnings.warn` it has run before only within one run of a graph
// (one InterpreterState), and c10's handler prints every warning it is
// given, so a model that warns in its forward (torchvision's scripted
// GoogLeNet: "Scripted GoogleNet always returns GoogleNetOutputs Tuple")
// printed a line at every micro-batch of every step, and at every node the
// profiler timed. Python prints each message from one line of code once.
#pragma once

namespace c10 {
class WarningHandler;
}

namespace mp {

// While alive, warnings raised on this thread (c10's handler is one per
// thread) go to stderr once a process for each message and source line:
// `warning: MESSAGE (FILE:LINE)`, FILE without its folders. Scopes nest.
class WarnOnceScope {
 public:
  WarnOnceScope();
  ~WarnOnceScope();
  WarnOnceScope(const WarnOnceScope&) = delete;
  WarnOnceScope& operator=(const WarnOnceScope&) = delete;

 private:
  c10::WarningHandler* previous_;
};

}  // namespace mp
