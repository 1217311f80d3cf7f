#include "control/policy/dagc.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

namespace gradgate::control {
namespace {

std::vector<double> allocate(const std::vector<double>& weights, double mean_keep,
                             KeepBounds bounds, DagcVariant variant) {
  auto keep = allocate_keep_fractions(weights, mean_keep, bounds, variant);
  EXPECT_TRUE(keep.ok()) << keep.status().to_string();
  return keep.ok() ? *keep : std::vector<double>(weights.size(), 0.0);
}

// The objective DAGC minimises.
double objective(const std::vector<double>& weights, const std::vector<double>& keep) {
  double sum = 0.0;
  for (size_t i = 0; i < weights.size(); ++i) sum += weights[i] * weights[i] / keep[i];
  return sum;
}

void expect_sum_and_bounds(const std::vector<double>& keep, double mean_keep, KeepBounds bounds) {
  const double total = mean_keep * static_cast<double>(keep.size());
  EXPECT_NEAR(std::accumulate(keep.begin(), keep.end(), 0.0), total, 1e-9 * total);
  for (const double k : keep) {
    EXPECT_GE(k, bounds.lo);
    EXPECT_LE(k, bounds.hi);
  }
}

class DagcVariants : public ::testing::TestWithParam<DagcVariant> {};

TEST_P(DagcVariants, UnclippedKeepIsProportionalToData) {
  const std::vector<double> weights = {4, 2, 1, 1};
  const std::vector<double> keep = allocate(weights, 0.01, {.lo = 0.001, .hi = 1.0}, GetParam());
  expect_sum_and_bounds(keep, 0.01, {.lo = 0.001, .hi = 1.0});
  EXPECT_NEAR(keep[0], 0.04 * 4 / 8, 1e-15);
  EXPECT_NEAR(keep[1], 0.04 * 2 / 8, 1e-15);
  EXPECT_NEAR(keep[2], 0.04 * 1 / 8, 1e-15);
  EXPECT_DOUBLE_EQ(keep[2], keep[3]);
}

TEST_P(DagcVariants, EqualDataGivesUniformKeep) {
  const std::vector<double> keep =
      allocate({3, 3, 3, 3, 3}, 0.02, {.lo = 0.001, .hi = 1.0}, GetParam());
  for (const double k : keep) EXPECT_DOUBLE_EQ(k, 0.02);
}

TEST_P(DagcVariants, ClipsAtBothBoundsAndStillMeetsTheBudget) {
  const KeepBounds bounds{.lo = 0.05, .hi = 1.0};
  const std::vector<double> weights = {100, 10, 1, 1, 0.01};
  const std::vector<double> keep = allocate(weights, 0.3, bounds, GetParam());
  expect_sum_and_bounds(keep, 0.3, bounds);
  EXPECT_DOUBLE_EQ(keep[0], 1.0);
  // The exact allocation keeps the smallest node at the floor; the approximation spreads the
  // surplus of node 0 over every node with room, the smallest too.
  if (GetParam() == DagcVariant::kExact) {
    EXPECT_DOUBLE_EQ(keep[4], 0.05);
  }
  for (size_t i = 1; i < keep.size(); ++i) EXPECT_GE(keep[i - 1], keep[i]) << i;
}

TEST_P(DagcVariants, MoreDataNeverGetsLessKeepOnRandomJobs) {
  std::mt19937_64 random(7);
  std::uniform_real_distribution<double> weight(0.01, 100.0);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<double> weights(1 + trial % 17);
    for (double& w : weights) w = weight(random);
    const KeepBounds bounds{.lo = 0.001 + 0.1 * unit(random), .hi = 0.5 + 0.5 * unit(random)};
    const double mean = bounds.lo + (bounds.hi - bounds.lo) * unit(random);
    const std::vector<double> keep = allocate(weights, mean, bounds, GetParam());
    expect_sum_and_bounds(keep, mean, bounds);
    for (size_t i = 0; i < weights.size(); ++i) {
      for (size_t j = 0; j < weights.size(); ++j) {
        if (weights[i] > weights[j]) {
          EXPECT_GE(keep[i], keep[j]) << "trial " << trial;
        }
      }
    }
  }
}

TEST_P(DagcVariants, RefusesInfeasibleOrBadInputs) {
  const KeepBounds bounds{.lo = 0.01, .hi = 1.0};
  EXPECT_EQ(allocate_keep_fractions({}, 0.1, bounds, GetParam()).status().code(),
            ErrorCode::kInvalidArgument);
  const std::vector<double> zero = {1.0, 0.0};
  EXPECT_EQ(allocate_keep_fractions(zero, 0.1, bounds, GetParam()).status().code(),
            ErrorCode::kInvalidArgument);
  const std::vector<double> nan = {1.0, std::nan("")};
  EXPECT_EQ(allocate_keep_fractions(nan, 0.1, bounds, GetParam()).status().code(),
            ErrorCode::kInvalidArgument);
  const std::vector<double> ok = {1.0, 2.0};
  EXPECT_EQ(allocate_keep_fractions(ok, 0.001, bounds, GetParam()).status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(allocate_keep_fractions(ok, 0.1, {.lo = 0.01, .hi = 1.5}, GetParam()).status().code(),
            ErrorCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Both, DagcVariants,
                         ::testing::Values(DagcVariant::kExact, DagcVariant::kApproximate));

TEST(Dagc, ExactIsTheOptimumTheApproximationIsClose) {
  const KeepBounds bounds{.lo = 0.01, .hi = 0.2};
  const std::vector<double> weights = {10, 6, 3, 1};
  const std::vector<double> exact = allocate(weights, 0.12, bounds, DagcVariant::kExact);
  const std::vector<double> approx = allocate(weights, 0.12, bounds, DagcVariant::kApproximate);
  // Exact: k_i = clamp(c w_i) for one c; node 0 is clipped at hi, the others share one c.
  EXPECT_DOUBLE_EQ(exact[0], 0.2);
  EXPECT_NEAR(exact[1] / 6, exact[3] / 1, 1e-12);
  EXPECT_NEAR(exact[2] / 3, exact[3] / 1, 1e-12);
  EXPECT_LE(objective(weights, exact), objective(weights, approx));
  EXPECT_LE(objective(weights, approx), 1.05 * objective(weights, exact));
  for (size_t i = 0; i < weights.size(); ++i) EXPECT_NEAR(approx[i], exact[i], 0.02) << i;
}

TEST(Dagc, MeanAtALowerBoundGivesUniformKeep) {
  for (const DagcVariant variant : {DagcVariant::kExact, DagcVariant::kApproximate}) {
    const std::vector<double> keep = allocate({5, 1, 1}, 0.01, {.lo = 0.01, .hi = 1.0}, variant);
    for (const double k : keep) EXPECT_DOUBLE_EQ(k, 0.01);
  }
}

}  // namespace
}  // namespace gradgate::control
