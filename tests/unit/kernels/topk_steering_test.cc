// The candidate threshold's steering shared by the CPU and CUDA top-k selections
// (gradgate/kernels/topk_steering.h): the next thresholds after given observations, the window and
// when the steering gives up, the warm start, and the CPU selection scanning where the steering
// leads on values that need rescans (the CUDA half of that is in kernels_cuda/topk_cuda_test.cc).
#include "gradgate/kernels/topk_steering.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <span>
#include <vector>

#include "codec_data.h"
#include "gradgate/kernels/codec_spec.h"
#include "topk_select.h"

namespace gradgate::kernels::topk {
namespace {

constexpr size_t kN = 100000;
constexpr size_t kK = 1000;
constexpr double kTarget = 1500.0;  // kCandidateFactor * kK

// Where count(t) reaches kTarget on the log-linear model through (t0, c0) and (t1, c1).
double model(double t0, double c0, double t1, double c1) {
  return t0 + (t1 - t0) / std::log(c0 / c1) * std::log(c0 / kTarget);
}

size_t count_above(std::span<const float> values, float t) {
  size_t count = 0;
  for (float v : values) count += std::fabs(v) > t;
  return count;
}

// Where the steering leads a selection of k that scans `values` from t: the last threshold, its
// count (in the window unless the steering gave up) and the scans after the first.
struct Steered {
  float t;
  size_t count;
  int rescans;
};

Steered steer(std::span<const float> values, size_t k, double b, float t) {
  const size_t n = values.size();
  ScanSteering steering(n, k, candidate_capacity(n, k), b);
  Steered steered{t, count_above(values, t), 0};
  while (!steering.in_window(steered.count)) {
    const std::optional<float> next = steering.next(steered.t, steered.count);
    if (!next) break;
    steered = {*next, count_above(values, *next), steered.rescans + 1};
  }
  return steered;
}

double mean_magnitude(std::span<const float> values) {
  double sum = 0.0;
  for (float v : values) sum += std::fabs(v);
  return sum / static_cast<double>(values.size());
}

TEST(TopkSteeringTest, CapacityAndLaplaceEstimate) {
  EXPECT_EQ(candidate_capacity(kN, kK), 9024u);
  EXPECT_EQ(candidate_capacity(2000, kK), 2000u);
  EXPECT_FLOAT_EQ(laplace_threshold(1.0, kN, kTarget), std::log(kN / kTarget));
  EXPECT_EQ(laplace_threshold(1.0, 1000, kTarget), 0.0f);                // the target exceeds n
  EXPECT_FLOAT_EQ(laplace_threshold(2.0, kN, 0.5), 2.0 * std::log(kN));  // targets below 1 are 1
}

TEST(TopkSteeringTest, WindowIsKToCapacity) {
  const ScanSteering steering(kN, kK, 9024, 1.0);
  EXPECT_FALSE(steering.in_window(kK - 1));
  EXPECT_TRUE(steering.in_window(kK));
  EXPECT_TRUE(steering.in_window(9024));
  EXPECT_FALSE(steering.in_window(9025));
}

TEST(TopkSteeringTest, TooFewAtFirstFollowsTheModelThroughZeroAndN) {
  // A cold step whose Laplace estimate leaves 10 candidates: the model runs through (0, n), where
  // every element counts, not the midpoint of [0, t].
  ScanSteering steering(kN, kK, 9024, 1.0);
  const float t0 = laplace_threshold(1.0, kN, kTarget);
  EXPECT_FLOAT_EQ(t0, 4.19970512f);
  const std::optional<float> t1 = steering.next(t0, 10);
  ASSERT_TRUE(t1.has_value());
  EXPECT_FLOAT_EQ(*t1, model(0.0, kN, t0, 10));
  EXPECT_FLOAT_EQ(*t1, 1.91496968f);
  const std::optional<float> t2 = steering.next(*t1, 10);  // still 10: the closer point counts
  ASSERT_TRUE(t2.has_value());
  EXPECT_FLOAT_EQ(*t2, model(0.0, kN, *t1, 10));
  EXPECT_FLOAT_EQ(*t2, 0.873182476f);
}

TEST(TopkSteeringTest, TooManyExtrapolatesWithTheMeanThenBrackets) {
  ScanSteering steering(kN, kK, 9024, 0.1);
  const std::optional<float> t1 = steering.next(0.42f, 10000);  // no point below the window yet
  ASSERT_TRUE(t1.has_value());
  EXPECT_FLOAT_EQ(*t1, 0.42 + 0.1 * std::log(10000 / kTarget));
  const std::optional<float> t2 = steering.next(*t1, 500);
  ASSERT_TRUE(t2.has_value());
  EXPECT_FLOAT_EQ(*t2, model(0.42, 10000, *t1, 500));
  EXPECT_FLOAT_EQ(*t2, 0.540139735f);
}

TEST(TopkSteeringTest, NoCandidatesHalveTheThreshold) {
  ScanSteering steering(kN, kK, 9024, 1.0);
  EXPECT_EQ(steering.next(8.0f, 0).value_or(-1.0f), 4.0f);
  EXPECT_EQ(steering.next(4.0f, 0).value_or(-1.0f), 2.0f);
}

TEST(TopkSteeringTest, AFlatModelDoublesTheThreshold) {
  ScanSteering steering(kN, kK, 9024, 0.0);  // b = 0: the extrapolation does not move
  EXPECT_EQ(steering.next(1.0f, 20000).value_or(-1.0f), 2.0f);
}

TEST(TopkSteeringTest, FewerThanKNonZeroAreSentAsTheyAre) {
  ScanSteering steering(kN, 10, 1034, 1.0);
  EXPECT_FALSE(steering.next(0.0f, 3).has_value());
  EXPECT_FALSE(steering.needs_whole_array(0.0f, 3));
}

TEST(TopkSteeringTest, TiesBetweenAdjacentFloatsGiveUpForTheWholeArray) {
  ScanSteering steering(kN, kK, 9024, 1.0);
  ASSERT_TRUE(steering.next(1.0f, 20000).has_value());
  const float above = std::nextafter(1.0f, 2.0f);
  EXPECT_FALSE(steering.next(above, 5).has_value());
  EXPECT_TRUE(steering.needs_whole_array(above, 5));
  EXPECT_TRUE(steering.needs_whole_array(1.0f, 20000));
  EXPECT_FALSE(steering.needs_whole_array(1.0f, kK));
}

TEST(TopkSteeringTest, GivesUpAfterTheLastScan) {
  ScanSteering steering(kN, kK, 9024, 1.0);
  float t = laplace_threshold(1.0, kN, kTarget);
  for (int scan = 0; scan < ScanSteering::kMaxScans; ++scan) {
    const std::optional<float> next = steering.next(t, 10);
    ASSERT_TRUE(next.has_value()) << "scan " << scan;
    EXPECT_LT(*next, t);
    t = *next;
  }
  EXPECT_FALSE(steering.next(t, 10).has_value());
  EXPECT_TRUE(steering.needs_whole_array(t, 10));
}

TEST(TopkSteeringTest, LaplaceEstimateAndSteeringReachTheWindow) {
  const size_t n = 1 << 20;
  const size_t k = 10486;
  std::mt19937_64 rng(9);
  std::exponential_distribution<float> magnitude(1.0f / 2e-3f);
  std::vector<float> values(n);
  for (auto& v : values) v = (rng() & 1 ? 1.0f : -1.0f) * magnitude(rng);
  const double b = mean_magnitude(values);
  const float estimate = laplace_threshold(b, n, kCandidateFactor * static_cast<double>(k));
  const size_t estimated = count_above(values, estimate);
  EXPECT_GT(estimated, k);
  EXPECT_LT(estimated, 2 * k);
  for (float start : {0.0f, 1e-9f, estimate * 0.2f, estimate * 3.0f, 1.0f}) {
    SCOPED_TRACE(start);
    const Steered steered = steer(values, k, b, start);
    EXPECT_GE(steered.count, k);
    EXPECT_LE(steered.count, candidate_capacity(n, k));
    EXPECT_LE(steered.rescans, 8);
  }
}

TEST(TopkSteeringTest, WarmStartPredictsBelowTheLastThreshold) {
  WarmStart warm;
  EXPECT_FALSE(warm.warm());
  EXPECT_EQ(warm.candidate_threshold(), std::numeric_limits<float>::infinity());
  warm.update(1.0f, 0.8f, 1500, 1000, 0.3, false);
  EXPECT_TRUE(warm.warm());
  EXPECT_EQ(warm.drift, 0.0f);
  EXPECT_GT(warm.margin, 0.0f);
  EXPECT_LT(warm.candidate_threshold(), 1.0f);
  warm.update(1.1f, warm.candidate_threshold(), 1500, 1000, 0.3, true);
  EXPECT_FLOAT_EQ(warm.drift, 0.1f);
  EXPECT_LT(warm.candidate_threshold(), 1.1f + warm.drift);
  warm.update(3.0f, 1.0f, 1500, 1000, 0.3, true);  // a jump is not a trend
  EXPECT_EQ(warm.drift, 0.0f);
  warm.update(0.0f, 0.0f, 0, 0, 0.0, true);  // no threshold: the state stays
  EXPECT_EQ(warm.threshold, 3.0f);
}

// Both codecs rescan where the steering leads; on these values its last scan leaves 1050
// candidates, which threshold mode keeps as they are. The CPU selection does just that.
TEST(TopkSteeringTest, TheCpuSelectionScansWhereTheSteeringLeads) {
  for (bool too_high : {true, false}) {
    SCOPED_TRACE(too_high ? "estimate too high" : "estimate too low");
    const auto values = test_util::make_topk_rescan_values(too_high, 7);
    ASSERT_EQ(values.size(), kN);
    const double b = mean_magnitude(values);
    const Steered steered = steer(values, kK, b, laplace_threshold(b, kN, kTarget));
    EXPECT_EQ(steered.count, 1050u);
    EXPECT_EQ(steered.rescans, 2);
    std::vector<uint32_t> expected;
    for (uint32_t i = 0; i < kN; ++i) {
      if (std::fabs(values[i]) > steered.t) expected.push_back(i);
    }

    std::vector<float> residual(kN, 0.0f);
    cpu::TopkSelectorState state;
    const auto selection =
        cpu::select_topk(values, residual, kK, TopkSelect::kThreshold, state).value();
    // The accumulating pass, the estimate's scan and the rescans.
    EXPECT_EQ(selection.passes, 2 + steered.rescans);
    EXPECT_EQ(std::vector<uint32_t>(selection.indices.begin(), selection.indices.end()), expected);
  }
}

}  // namespace
}  // namespace gradgate::kernels::topk
