// Where the random ops of a canonical graph draw their numbers from. After
// SeedRandomOps (seed_random_ops.h) every random op takes a generator made
// by OpGenerator for that one call, keyed by the (seed, step, micro-batch)
// of the RngScope the calling thread is in, the op's ordinal and how often
// the op has drawn in that scope. No op reads LibTorch's global generator,
// so what a run draws does not depend on which thread runs which stage,
// in which order, or how often a forward is run again. docs/executor.md,
// "Randomness", has the contract.
#pragma once

#include <ATen/core/Generator.h>

#include <cstdint>
#include <unordered_map>

namespace mp {

struct RngKey {
  uint64_t seed = 0;       // mpexec --seed
  int64_t step = 0;        // the step, from 0 (warm-up steps count)
  int64_t microbatch = 0;  // its index in the whole batch, over all replicas
};

// While alive, random ops that this thread runs draw from generators keyed
// by `key`, each op's calls counted from 0 (an op inside a loop draws anew
// each iteration). Scopes nest: the enclosing one comes back on exit.
// Outside any scope an op draws as under the key {0, 0, 0}, every call as
// its first: profiling and shape probes, which keep no numbers.
class RngScope {
 public:
  explicit RngScope(const RngKey& key);
  ~RngScope();
  RngScope(const RngScope&) = delete;
  RngScope& operator=(const RngScope&) = delete;

 private:
  friend at::Generator OpGenerator(int64_t op);
  RngKey key_;
  std::unordered_map<int64_t, int64_t> calls_;  // op -> draws so far
  RngScope* enclosing_;
};

// A new CPU generator for random op `op` (its ordinal in the canonical
// graph), seeded by mixing the current scope's key, the op and its call.
at::Generator OpGenerator(int64_t op);

// SplitMix64's finaliser over a running hash: the mixing step of the key.
uint64_t MixSeed(uint64_t hash, uint64_t value);

}  // namespace mp
