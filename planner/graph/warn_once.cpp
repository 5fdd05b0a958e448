#include "planner/graph/warn_once.h"

#include <c10/util/Exception.h>
#include <torch/version.h>

#include <iostream>
#include <mutex>
#include <string>
#include <unordered_set>

namespace mp {

namespace {

// LibTorch 2.0 made c10::Warning a class (the warning, its kind and place)
// and moved the handler's setters to c10::WarningUtils; 1.13 hands the
// handler the place and the message, and c10::Warning is a namespace.
#if TORCH_VERSION_MAJOR >= 2
namespace c10_warning_utils = c10::WarningUtils;
#else
namespace c10_warning_utils = c10::Warning;
#endif

class OncePerProcess final : public c10::WarningHandler {
 public:
#if TORCH_VERSION_MAJOR >= 2
  void process(const c10::Warning& warning) override { Print(warning.source_location(), warning.msg()); }
#else
  void process(const c10::SourceLocation& where, const std::string& msg, const bool /*verbatim*/) override {
    Print(where, msg);
  }
#endif

 private:
  void Print(const c10::SourceLocation& where, const std::string& msg) {
    const std::string file = where.file == nullptr ? "" : where.file;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!printed_.insert(file + ":" + std::to_string(where.line) + ":" + msg).second) return;
    }
    std::string line = "warning: " + msg;
    if (!file.empty()) line += " (" + file.substr(file.find_last_of('/') + 1) + ":" + std::to_string(where.line) + ")";
    std::cerr << line + "\n" << std::flush;
  }

  std::mutex mutex_;
  std::unordered_set<std::string> printed_;
};

OncePerProcess& TheOncePerProcessHandler() {
  static auto* handler = new OncePerProcess;  // never destroyed: threads may warn during exit
  return *handler;
}

}  // namespace

WarnOnceScope::WarnOnceScope() : previous_(c10_warning_utils::get_warning_handler()) {
  c10_warning_utils::set_warning_handler(&TheOncePerProcessHandler());
}

WarnOnceScope::~WarnOnceScope() { c10_warning_utils::set_warning_handler(previous_); }

}  // namespace mp
