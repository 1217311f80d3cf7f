// Test data for the codec tests: gradients with the values that test an encoder's edges (NaN,
// infinities, saturating and overflowing values, denormals, signed zeros, rounding ties),
// gradients whose top-k selection needs rescans, and bit-exact comparisons of floats and frames.
#pragma once

#include <algorithm>
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

/// 100000 values whose top-k selection at density 0.01 (k = 1000, at most 1100 kept) needs
/// rescans, the Laplace estimate from the mean |v| being far off, and ends with 1050 candidates,
/// all kept: bands of |v| over Laplace noise of scale 1e-3, with gaps where the scans fall.
/// `estimate_too_high`: ten values of 1e4 inflate the mean, so that the estimate leaves only them
/// above it, and the count model through (0, n) steers the rescans past them to the gap between
/// 1040 values in [0.95, 1] and 2000 in [0.6, 0.75]. Otherwise 8950 values in [0.15, 0.17] lie
/// above the estimate, and the rescans climb past them to the 1050 in [0.5, 1].
inline std::vector<float> make_topk_rescan_values(bool estimate_too_high, uint64_t seed) {
  struct Band {
    size_t count;
    float lo, hi;
  };
  const std::vector<Band> bands =
      estimate_too_high
          ? std::vector<Band>{{10, 1e4f, 1e4f}, {1040, 0.95f, 1.0f}, {2000, 0.6f, 0.75f}}
          : std::vector<Band>{{1050, 0.5f, 1.0f}, {8950, 0.15f, 0.17f}};
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::exponential_distribution<float> noise(1e3f);
  std::vector<float> out;
  for (const Band& band : bands) {
    for (size_t i = 0; i < band.count; ++i) {
      out.push_back(band.lo + (band.hi - band.lo) * uniform(rng));
    }
  }
  while (out.size() < 100000) out.push_back(noise(rng));
  for (auto& v : out) v = rng() & 1 ? -v : v;
  std::shuffle(out.begin(), out.end(), rng);
  return out;
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
