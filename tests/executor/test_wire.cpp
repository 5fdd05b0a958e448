// WireStream between two ranks (here two threads of one process over
// loopback, a real Gloo group): messages of every size in any order arrive
// whole and in order, the channel's capacity growing when one is larger, a
// smaller one after it; values of every kind a boundary carries; and the
// sizes-first SendMessage on the same group beside it.
#include "tests/doctest_torch.h"

#include <chrono>
#include <exception>
#include <thread>

#include "executor/process_group.h"
#include "executor/wire.h"

namespace {

// Micro-batch `n`'s message: `floats` values in a tensor that takes a
// gradient, an int, an uninitialized value and, backwards, gradients with
// an undefined one among them.
mp::WireMessage Message(int64_t n, int64_t floats) {
  mp::WireMessage m;
  m.microbatch = n;
  m.values = {at::arange(floats, at::kFloat).add(double(n)).requires_grad_(true), c10::IValue(n * 7),
              c10::IValue::uninitialized()};
  m.grads = {{at::full({2, 3}, double(n), at::kDouble), at::Tensor()}};
  return m;
}

void CheckMessage(const mp::WireMessage& got, int64_t n, int64_t floats) {
  CAPTURE(n);
  CHECK(got.microbatch == n);
  REQUIRE(got.values.size() == 3);
  CHECK(at::equal(got.values[0].toTensor(), at::arange(floats, at::kFloat).add(double(n))));
  CHECK(got.values[0].toTensor().requires_grad());
  CHECK(got.values[1].toInt() == n * 7);
  CHECK(got.values[2].tagKind() == "Uninitialized");
  REQUIRE(got.grads.size() == 1);
  REQUIRE(got.grads[0].size() == 2);
  CHECK(at::equal(got.grads[0][0], at::full({2, 3}, double(n), at::kDouble)));
  CHECK_FALSE(got.grads[0][1].defined());
}

}  // namespace

TEST_SUITE_BEGIN("over processes" * doctest::skip(!mp::ProcessGroupsAvailable()));

TEST_CASE("a stream's messages arrive whole and in order while its capacity grows and they shrink") {
  // Small, much larger (the capacity grows), smaller again (sent in the
  // larger transfer), larger still, then the first size: on two tags at
  // once, one each way.
  const std::vector<int64_t> sizes = {3, 40000, 10, 0, 250000, 3};
  const int port = mp::FreePort();
  std::exception_ptr failed[2];
  auto rank = [&](int r) {
    try {
      mp::RankEnv env;
      env.rank = r;
      env.world_size = 2;
      env.master_port = port;
      mp::ProcessGroup group(env, std::chrono::seconds(30));
      mp::WireStreams streams(group);
      const int peer = 1 - r;
      std::thread other([&] {  // each rank receives on the other tag at the same time
        mp::WireStream& in = streams.At(peer, 10 + peer);
        for (size_t i = 0; i < sizes.size(); ++i) CheckMessage(in.Receive(), int64_t(i), sizes[i]);
      });
      mp::WireStream& out = streams.At(peer, 10 + r);
      for (size_t i = 0; i < sizes.size(); ++i) out.Send(Message(int64_t(i), sizes[i]));
      other.join();
      // The sizes-first form on the same group, another tag.
      if (r == 0) {
        mp::SendMessage(group, 1, 20, Message(9, 5));
      } else {
        CheckMessage(mp::ReceiveMessage(group, 0, 20), 9, 5);
      }
    } catch (...) {
      failed[r] = std::current_exception();
    }
  };
  std::thread zero(rank, 0), one(rank, 1);
  zero.join();
  one.join();
  for (int r : {1, 0}) {
    if (failed[r]) std::rethrow_exception(failed[r]);
  }
}

TEST_SUITE_END();
