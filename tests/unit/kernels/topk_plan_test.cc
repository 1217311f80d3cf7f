// The host-side decisions of the CUDA top-k selection (kernels/cuda/topk_plan.h), run on the CPU:
// the order keys and the radix select's cuts (driven here by histograms computed on the host).
#include "topk_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace gradgate::kernels::cuda::topk {
namespace {

// The keys of `values`, their histogram in `range`, as the device computes them.
std::vector<uint32_t> histogram(const std::vector<float>& values, const KeyRange& range) {
  std::vector<uint32_t> bins(kSelectBins, 0);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint64_t key = order_key(values[i], static_cast<uint32_t>(i));
    if (range.holds(key)) ++bins[range.bin(key)];
  }
  return bins;
}

struct HostCut {
  uint64_t key;
  size_t selected;
  int levels;
};

// The radix select of the device over the non-zero values, on the host.
HostCut radix_select(const std::vector<float>& values, size_t k, size_t k_max) {
  float largest = 0.0f;
  for (float v : values) largest = std::max(largest, std::fabs(v));
  KeyRange range = key_range(first_key_above(0.0f), order_key(largest, 0));
  size_t above = 0;
  for (int levels = 1;; ++levels) {
    const auto bins = histogram(values, range);
    const CutStep step = cut_step(bins.data(), range, above, k, k_max);
    if (step.done) return {step.key, step.selected, levels};
    range = step.next;
    above = step.above;
  }
}

std::vector<float> laplace(size_t n, uint64_t seed, float scale) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<float> magnitude(1.0f / scale);
  std::vector<float> out(n);
  for (auto& v : out) v = (rng() & 1 ? 1.0f : -1.0f) * magnitude(rng);
  return out;
}

// The k largest |v| (non-zero), ties by lower index: the CPU codec's exact selection.
std::vector<uint32_t> exact_top(const std::vector<float>& values, size_t k) {
  std::vector<uint32_t> order;
  for (uint32_t i = 0; i < values.size(); ++i) {
    if (values[i] != 0.0f) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return std::fabs(values[a]) > std::fabs(values[b]);
  });
  order.resize(std::min(k, order.size()));
  std::sort(order.begin(), order.end());
  return order;
}

std::vector<uint32_t> kept(const std::vector<float>& values, uint64_t cut) {
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < values.size(); ++i) {
    if (values[i] != 0.0f && order_key(values[i], i) >= cut) out.push_back(i);
  }
  return out;
}

TEST(TopkPlanTest, OrderKeysRankByMagnitudeThenLowerIndex) {
  EXPECT_GT(order_key(2.0f, 9), order_key(1.0f, 0));
  EXPECT_GT(order_key(-2.0f, 9), order_key(1.5f, 0));
  EXPECT_GT(order_key(1.0f, 3), order_key(-1.0f, 4));
  EXPECT_EQ(order_key(-1.0f, 3), order_key(1.0f, 3));
  EXPECT_EQ(key_magnitude(order_key(-0.75f, 12)), 0.75f);
  const float t = 0.5f;
  EXPECT_GE(order_key(std::nextafter(t, 1.0f), 0xFFFFFFFFu), first_key_above(t));
  EXPECT_LT(order_key(t, 0), first_key_above(t));
  EXPECT_LT(order_key(0.0f, 0), first_key_above(0.0f));
}

TEST(TopkPlanTest, KeyRangesFitTheirBins) {
  const KeyRange wide = key_range(0, ~uint64_t{0});
  EXPECT_LT(wide.bin(~uint64_t{0}), kSelectBins);
  EXPECT_EQ(wide.bin(0), 0u);
  const KeyRange narrow = key_range(100, 100 + kSelectBins - 1);
  EXPECT_EQ(narrow.shift, 0);
  EXPECT_EQ(narrow.bin(100 + kSelectBins - 1), kSelectBins - 1);
  EXPECT_EQ(key_range(5, 5).shift, 0);
}

TEST(TopkPlanTest, ExactCutsSelectTheCpuCodecsElements) {
  for (size_t n : {1u, 7u, 1000u, 100000u}) {
    for (double density : {0.1, 0.01, 0.001}) {
      SCOPED_TRACE(testing::Message() << "n " << n << " density " << density);
      auto values = laplace(n, n + 17, 1e-3f);
      const size_t k = std::clamp<size_t>(std::llround(density * n), 1, n);
      const HostCut cut = radix_select(values, k, k);
      EXPECT_EQ(cut.selected, k);
      EXPECT_EQ(kept(values, cut.key), exact_top(values, k));
      EXPECT_LE(cut.levels, 6);
    }
  }
}

TEST(TopkPlanTest, TiesAreBrokenByLowerIndex) {
  std::vector<float> values(5000);
  std::mt19937_64 rng(3);
  for (auto& v : values) v = static_cast<float>(static_cast<int>(rng() % 5) - 2);  // -2 .. 2
  for (size_t k : {1u, 10u, 999u, 1000u, 1500u, 4000u, 4999u}) {
    SCOPED_TRACE(k);
    const HostCut cut = radix_select(values, k, k);
    const auto expected = exact_top(values, k);
    EXPECT_EQ(cut.selected, expected.size());
    EXPECT_EQ(kept(values, cut.key), expected);
  }
}

TEST(TopkPlanTest, ThresholdCutsLandInTheWindowInOneHistogram) {
  const auto values = laplace(1 << 18, 5, 1.0f);
  const size_t k = 2621;
  const size_t k_max = k + k / 10;
  const HostCut cut = radix_select(values, k, k_max);
  EXPECT_GE(cut.selected, k);
  EXPECT_LE(cut.selected, k_max);
  EXPECT_EQ(kept(values, cut.key).size(), cut.selected);
  EXPECT_LE(cut.levels, 2);
}

TEST(TopkPlanTest, FewerKeysThanKAreAllKept) {
  const std::vector<float> values = {0.0f, 1.0f, 0.0f, -3.0f};
  const HostCut cut = radix_select(values, 3, 3);
  EXPECT_EQ(cut.selected, 2u);
  EXPECT_EQ(kept(values, cut.key), (std::vector<uint32_t>{1, 3}));
}

}  // namespace
}  // namespace gradgate::kernels::cuda::topk
