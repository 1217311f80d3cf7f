// The deterministic inputs of gradgate_test_worker, so that a test can recompute what every worker
// of a job put into every tensor at every step, and so the expected sum.
#pragma once

#include <cstdint>

namespace gradgate::test {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Element `i` of tensor `tensor` (its index on the command line) at step `step` of worker
/// `global_worker`: a uniform value in [-1, 1) with 24 random bits, exact in fp32.
inline float test_value(uint64_t seed, uint32_t tensor, uint64_t step, uint32_t global_worker,
                        uint64_t i) {
  uint64_t h = splitmix64(seed);
  h = splitmix64(h ^ tensor);
  h = splitmix64(h ^ step);
  h = splitmix64(h ^ global_worker);
  h = splitmix64(h ^ i);
  return static_cast<float>(h >> 40) * (1.0f / 8388608.0f) - 1.0f;
}

}  // namespace gradgate::test
