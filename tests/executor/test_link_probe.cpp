// The executor's all-reduce after a step (link_probe.h), on two ranks of a
// real Gloo group over loopback, two processes as mpexec's replicas are
// (rank 1 forked from the test; what it did is seen here in the sums, and
// rank 0's state, only; threads under ThreadSanitizer): every round runs each rank's step and
// sums the gradients it leaves, in a buffer kept between rounds where the
// next step adds into them (gradient_sum.h); a step that fails on one rank
// ends the probe with that failure, not the other rank's wait for it.
#include "tests/doctest_torch.h"

#include <ATen/ATen.h>

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

#include "common/error.h"
#include "common/sanitizer_build.h"
#include "executor/link_probe.h"
#include "executor/process_group.h"

TEST_CASE("the all-reduce after a step runs each rank's step before every round and sums its gradients" *
          doctest::skip(!mp::ProcessGroupsAvailable())) {
  // Per rank, two parameters whose step leaves gradients of rank + 1; the
  // second has none on rank 0 (a layer its backward did not reach), which
  // adds zeros there, as mpexec's sum does.
  std::array<std::atomic<int>, 2> steps{};
  std::array<std::vector<at::Tensor>, 2> params;
  for (auto& p : params) p = {at::zeros({1000}), at::zeros({2, 12})};
  const auto step = [&](int rank) {
    ++steps.at(rank);
    for (size_t i = 0; i < 2; ++i) {
      at::Tensor& p = params[rank][i];
      p.mutable_grad() = rank == 0 && i == 1 ? at::Tensor() : at::full(p.sizes(), rank + 1.0);
    }
    return params[rank];
  };
  const mp::StepAllReduce sum = mp::ProbeAllReduceAfterStep(step, 2, 4);
  CHECK(steps[0] == 6);
  CHECK(sum.bytes == 1024 * 4);  // the two gradients in one float buffer
  CHECK(sum.ms > 0);
  CHECK(sum.gap_ms >= 0);  // how far apart the ranks' steps ended
  CHECK(sum.round_ms > 0);
  // What the last round left: every gradient the sum over the two ranks
  // (rank 1's step ran: its gradients are in it), in its parameter's shape.
  CHECK(at::equal(params[0][0].grad(), at::full({1000}, 3.0)));
  CHECK(at::equal(params[0][1].grad(), at::full({2, 12}, 2.0)));
}

TEST_CASE("the gradients stay in the sum's buffer from round to round, but one a caller holds is left alone" *
          doctest::skip(!mp::ProcessGroupsAvailable())) {
  // Each round's step adds rank + 1 + 10 i to every gradient, into it where
  // it is defined, as a backward does. Round 2's step keeps the first
  // parameter's gradient, so that round's sum must not write into it.
  constexpr int kRounds = 5;
  std::array<std::vector<at::Tensor>, 2> params;
  for (auto& p : params) p = {at::zeros({1000}), at::zeros({2, 12})};
  std::array<std::array<const void*, kRounds>, 2> start{};  // the first gradient's data as round i starts
  std::array<std::array<bool, kRounds>, 2> zeroed{};        // and whether it was all zeros
  std::array<at::Tensor, 2> held;
  std::array<int, 2> round{};
  const auto step = [&](int rank) {
    const int i = round[rank]++;
    std::vector<at::Tensor>& mine = params[rank];
    const at::Tensor& first = mine[0].grad();
    start[rank][i] = first.defined() ? first.data_ptr() : nullptr;
    zeroed[rank][i] = first.defined() && at::equal(first, at::zeros_like(first));
    const double value = rank + 1.0 + 10 * i;
    for (at::Tensor& p : mine) {
      if (p.grad().defined()) {
        p.mutable_grad().add_(value);
      } else {
        p.mutable_grad() = at::full(p.sizes(), value);
      }
    }
    if (i == 2) held[rank] = mine[0].grad();
    return mine;
  };
  mp::ProbeAllReduceAfterStep(step, 1, kRounds - 1);
  const int r = 0;  // rank 1's are in its own process
  CHECK(start[r][0] == nullptr);
  for (int i = 1; i < kRounds; ++i) CHECK(zeroed[r][i]);  // each sum's gradients zeroed where they were
  CHECK(start[r][1] == start[r][2]);  // round 0's buffer, kept
  CHECK(start[r][3] != start[r][2]);  // round 2's sum took a new one: the caller held a gradient of the old
  CHECK(start[r][4] == start[r][3]);
  CHECK(at::equal(held[r], at::full({1000}, r + 1.0 + 20)));  // its own round-2 gradient, unchanged since
  CHECK(at::equal(params[r][0].grad(), at::full({1000}, 3.0 + 80)));  // round 4's sum
  CHECK(at::equal(params[r][1].grad(), at::full({2, 12}, 3.0 + 80)));
}

namespace {

// A step that throws `message` in rank `failing`'s `nth` step (counted in
// that rank's own process) and otherwise leaves a gradient of ones.
std::function<std::vector<at::Tensor>(int)> FailingStep(int failing, int nth, const std::string& message) {
  auto steps = std::make_shared<std::atomic<int>>(0);
  return [=](int rank) {
    if (rank == failing && ++*steps == nth) throw std::runtime_error(message);
    at::Tensor p = at::zeros({256});
    p.mutable_grad() = at::ones({256});
    return std::vector<at::Tensor>{p};
  };
}

}  // namespace

// Under ThreadSanitizer (tools/sanitize.sh tsan) the failing rank's case is
// skipped: Gloo makes the failure's exception on one of its threads and
// c10d's Work::wait rethrows it on ours, and neither libgloo nor LibTorch is
// instrumented, so TSan sees the exception's allocation and then its message
// read on another thread without the hand-off between them (a report in 10
// of 15 runs with the first suppressed). The plain build and ASan run it.
TEST_CASE("a step that fails on one rank ends the all-reduce after a step with that failure" *
          doctest::skip(!mp::ProcessGroupsAvailable() || mp::kUnderThreadSanitizer)) {
  // Rank 1 (the child process) fails in its third step. Rank 0, waiting in
  // the sum for it, fails too once rank 1's group is gone, as a
  // consequence: the error is rank 1's. And the other way round.
  CHECK_THROWS_WITH_AS(mp::ProbeAllReduceAfterStep(FailingStep(1, 3, "the model's backward broke"), 1, 4),
                       "the all-reduce after a step between two processes failed: the model's backward broke",
                       mp::Error);
  CHECK_THROWS_WITH_AS(mp::ProbeAllReduceAfterStep(FailingStep(0, 2, "rank 0's forward broke"), 1, 4),
                       "the all-reduce after a step between two processes failed: rank 0's forward broke", mp::Error);
}
