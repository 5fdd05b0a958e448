// Failure and RethrowWithContext: a failure's type decides the exit status
// (docs/errors.md), so the context is added without losing it.
#include "executor/runtime/failure.h"

#include <string>

#include "common/error.h"
#include "planner/graph/run_graph.h"

namespace mp {

void Failure::Record(int stage, int microbatch, std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!error_) {
      error_ = std::move(error);
      stage_ = stage;
      microbatch_ = microbatch;
    }
  }
  if (stop_) stop_();
}

bool Failure::Failed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_ != nullptr;
}

void Failure::RethrowIfFailed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!error_) return;
  RethrowWithContext(error_, microbatch_ < 0 ? Concat("stage ", stage_, ": ")
                                             : Concat("stage ", stage_, ", micro-batch ", microbatch_, ": "));
}

void RethrowWithContext(std::exception_ptr error, const std::string& context) {
  try {
    std::rethrow_exception(error);
  } catch (const InputError& e) {
    throw InputError(context + ErrorLine(e.what()));
  } catch (const PlanError& e) {
    throw PlanError(context + ErrorLine(e.what()));
  } catch (const InternalError& e) {
    throw InternalError(context + ErrorLine(e.what()));
  } catch (const std::exception& e) {
    throw Error(context + ErrorLine(e.what()));
  } catch (...) {
    throw Error(context + "an exception that is not a std::exception");
  }
}

}  // namespace mp
