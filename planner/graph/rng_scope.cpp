// RngScope and OpGenerator: a thread-local chain of scopes, and a fresh
// mt19937 generator per call seeded by SplitMix64 (Steele et al., "Fast
// splittable pseudorandom number generators", OOPSLA 2014) over the key.
// A fresh generator costs about a microsecond, against the tens of
// microseconds of the smallest dropout it feeds.
#include "planner/graph/rng_scope.h"

#include <ATen/CPUGeneratorImpl.h>

namespace mp {
namespace {

thread_local RngScope* current = nullptr;

}  // namespace

uint64_t MixSeed(uint64_t hash, uint64_t value) {
  uint64_t z = hash ^ (value + 0x9e3779b97f4a7c15ull + (hash << 6) + (hash >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

RngScope::RngScope(const RngKey& key) : key_(key), enclosing_(current) { current = this; }

RngScope::~RngScope() { current = enclosing_; }

at::Generator OpGenerator(int64_t op) {
  RngKey key;
  int64_t call = 0;
  if (current) {
    key = current->key_;
    call = current->calls_[op]++;
  }
  uint64_t hash = MixSeed(0, key.seed);
  hash = MixSeed(hash, uint64_t(key.step));
  hash = MixSeed(hash, uint64_t(key.microbatch));
  hash = MixSeed(hash, uint64_t(op));
  hash = MixSeed(hash, uint64_t(call));
  return at::detail::createCPUGenerator(hash);
}

}  // namespace mp
