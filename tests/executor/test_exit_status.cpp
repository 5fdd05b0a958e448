// A failure inside a pipeline step keeps its type on its way out of the
// runtime, and the mains turn each type into docs/errors.md's exit status:
// 1 for a bad input or a plan that cannot be made, 3 for an internal
// error (ours or LibTorch's), the body's own status (0, mpexec's 4 for a
// --verify mismatch) otherwise. 2 is the command-line parser's, tested
// with the bad-input cases (tests/errors).
#include <doctest/doctest.h>


#include <stdexcept>
#include <string>

#include "apps/exit_status.h"
#include "common/error.h"
#include "executor/runtime/failure.h"

namespace {

template <typename E>
std::exception_ptr Thrown(const std::string& what) {
  try {
    throw E(what);
  } catch (...) {
    return std::current_exception();
  }
}

// The status RunTool gives `body`, and the line it reported.
std::pair<int, std::string> Status(const std::function<int()>& body) {
  std::string line;
  const int status = mp::RunTool(body, [&](const std::string& l) { line = l; });
  return {status, line};
}

}  // namespace

TEST_CASE("a stage's failure is rethrown as its own type, led by its stage and micro-batch") {
  int stops = 0;
  mp::Failure failure([&] { ++stops; });
  CHECK_FALSE(failure.Failed());
  CHECK_NOTHROW(failure.RethrowIfFailed());
  failure.Record(1, 3, Thrown<mp::InputError>("training needs a tensor as the model's first output"));
  failure.Record(0, 4, Thrown<mp::InternalError>("a later failure"));  // the first one stands
  CHECK(failure.Failed());
  CHECK(stops == 2);  // every record stops the step
  CHECK_THROWS_WITH_AS(failure.RethrowIfFailed(),
                       "stage 1, micro-batch 3: training needs a tensor as the model's first output", mp::InputError);

  mp::Failure internal(nullptr);
  internal.Record(2, -1, Thrown<mp::InternalError>("stage input x never arrived"));
  CHECK_THROWS_WITH_AS(internal.RethrowIfFailed(), "stage 2: stage input x never arrived", mp::InternalError);

  // The model failing inside a stage (a LibTorch error): an Error, its first line.
  mp::Failure model(nullptr);
  model.Record(0, 0, Thrown<std::runtime_error>("mat1 and mat2 shapes cannot be multiplied\nException raised from"));
  try {
    model.RethrowIfFailed();
    FAIL("no exception");
  } catch (const mp::InternalError&) {
    FAIL("a model's failure is not an internal error");
  } catch (const mp::Error& e) {
    CHECK(std::string(e.what()) == "stage 0, micro-batch 0: mat1 and mat2 shapes cannot be multiplied");
  }
}

TEST_CASE("RunTool gives each failure docs/errors.md's exit status and one line") {
  CHECK(Status([] { return 0; }) == std::pair<int, std::string>{0, ""});
  CHECK(Status([] { return 4; }).first == 4);  // mpexec --verify found a difference
  CHECK(Status([]() -> int { throw mp::InputError("p.yaml: batch: missing"); }) ==
        std::pair<int, std::string>{1, "p.yaml: batch: missing"});
  CHECK(Status([]() -> int { throw mp::PlanError("no partition into 2 stages fits"); }).first == 1);
  CHECK(Status([]() -> int { throw mp::Error("stage 0, micro-batch 1: the model fails"); }).first == 1);
  CHECK(Status([]() -> int { throw mp::InternalError("2 label micro-batches for 4 micro-batches"); }) ==
        std::pair<int, std::string>{3, "internal error: 2 label micro-batches for 4 micro-batches"});
  CHECK(Status([]() -> int { throw std::logic_error("vector::at\nbacktrace"); }) ==
        std::pair<int, std::string>{3, "internal error: vector::at"});
}
