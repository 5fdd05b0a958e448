// Failure: the first failure of a pipeline step, wherever it happened (a
// stage's worker, a bridge to another rank), kept with its exception type,
// stage and micro-batch. Recording it runs the stop hook (closing every
// channel and aborting the process group), so every other thread's wait
// ends instead of hanging the run.
#pragma once

#include <exception>
#include <functional>
#include <mutex>
#include <string>

namespace mp {

class Failure {
 public:
  explicit Failure(std::function<void()> stop) : stop_(std::move(stop)) {}

  // Keeps the first failure only; `microbatch` -1 when not in one. Every
  // call stops the step.
  void Record(int stage, int microbatch, std::exception_ptr error);
  bool Failed() const;

  // Throws the first failure as its own type (InputError, PlanError,
  // InternalError, Error; a LibTorch or other exception as Error: the model
  // failed), its message led by "stage S, micro-batch M: ". Returns when
  // nothing failed.
  void RethrowIfFailed() const;

 private:
  std::function<void()> stop_;
  mutable std::mutex mutex_;
  std::exception_ptr error_;
  int stage_ = -1;
  int microbatch_ = -1;
};

// Rethrows `error` as its own mp::Error type with `context` before its
// message (ErrorLine of it: the first line of a LibTorch error); anything
// not an mp::Error as Error.
[[noreturn]] void RethrowWithContext(std::exception_ptr error, const std::string& context);

}  // namespace mp
