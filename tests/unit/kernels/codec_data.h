// Test data for the codec tests: gradients with the values that test an encoder's edges (NaN,
// infinities, saturating and overflowing values, denormals, signed zeros, rounding ties), and
// bit-exact comparisons of floats and frames.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include <gtest/gtest.h>

namespace gradgate::kernels::test_util {

/// Gaussian values of scale `scale` with, where `specials`, one element in 16 replaced by a value
/// that tests an edge: NaN, infinities, values that saturate fp16 or overflow an fp32 sum,
/// denormals, signed zeros and fp16 rounding ties.
inline std::vector<float> make_values(size_t n, uint64_t seed, bool specials, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  const float kEdges[] = {std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          70000.0f,
                          -65520.0f,
                          3.0e38f,
                          -3.0e38f,
                          1e-40f,
                          -1e-42f,
                          0.0f,
                          -0.0f,
                          1.00048828125f,  // halfway between two fp16 values
                          6.0e-8f};        // about the smallest fp16 subnormal
  std::vector<float> out(n);
  for (auto& v : out) {
    v = normal(rng);
    if (specials && rng() % 16 == 0) v = kEdges[rng() % std::size(kEdges)];
  }
  return out;
}

/// make_values with the edges that keep an encode valid: finite, no sum overflow, and at most
/// `largest` in magnitude (fp16's largest value for fp16 without a residual, which refuses what
/// it cannot send).
inline std::vector<float> make_finite_values(size_t n, uint64_t seed, float largest = 1e30f) {
  auto values = make_values(n, seed, true);
  for (auto& v : values) {
    if (!std::isfinite(v) || std::fabs(v) > largest) v = 0.5f;
  }
  return values;
}

inline ::testing::AssertionResult same_bits(std::span<const float> expected,
                                            std::span<const float> actual) {
  if (expected.size() != actual.size()) {
    return ::testing::AssertionFailure() << "sizes " << expected.size() << " vs " << actual.size();
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    if (std::bit_cast<uint32_t>(expected[i]) != std::bit_cast<uint32_t>(actual[i])) {
      return ::testing::AssertionFailure()
             << "element " << i << ": " << expected[i] << " vs " << actual[i];
    }
  }
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult same_bytes(std::span<const std::byte> expected,
                                             std::span<const std::byte> actual) {
  if (expected.size() != actual.size()) {
    return ::testing::AssertionFailure() << "sizes " << expected.size() << " vs " << actual.size();
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] != actual[i]) {
      return ::testing::AssertionFailure() << "byte " << i << ": " << static_cast<int>(expected[i])
                                           << " vs " << static_cast<int>(actual[i]);
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace gradgate::kernels::test_util
