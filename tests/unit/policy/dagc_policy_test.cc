#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "policy_test_support.h"

namespace gradgate::control {
namespace {

using testing::canonical;
using testing::decide;
using testing::density_of;
using testing::job;
using testing::kGigabitPerSecond;
using testing::settings;
using testing::uniform_codec;

Measurements skewed_job(std::vector<double> volumes) {
  Measurements m = job(static_cast<uint32_t>(volumes.size()), kGigabitPerSecond);
  for (size_t node = 0; node < volumes.size(); ++node) {
    m.node_samples[node].data_volume = volumes[node];
  }
  return m;
}

std::vector<double> densities(const PolicyDecision& d, const std::string& name) {
  std::vector<double> out;
  for (const std::string& codec : testing::tensor(d, name).codec_per_node) {
    EXPECT_EQ(canonical(codec).rfind("topk:", 0), 0u) << codec;
    out.push_back(density_of(codec));
  }
  return out;
}

double mean(const std::vector<double>& values) {
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

class DagcPolicies : public ::testing::TestWithParam<std::string> {
 protected:
  PolicySettings dagc_settings() const {
    PolicySettings s = settings(GetParam());
    s.target_communicate_seconds = 0.05;
    return s;
  }
};

TEST_P(DagcPolicies, SplitsTheBandwidthBudgetByDataVolume) {
  const Measurements m = skewed_job({4, 2, 1, 1});
  PolicySettings bandwidth = dagc_settings();
  bandwidth.name = "bandwidth";
  const double budget = density_of(uniform_codec(decide(bandwidth, m), "conv.weight"));
  ASSERT_DOUBLE_EQ(budget, 0.03);

  const PolicyDecision d = decide(dagc_settings(), m);
  for (const std::string name : {"conv.weight", "fc.weight"}) {
    const std::vector<double> keep = densities(d, name);
    ASSERT_EQ(keep.size(), 4u);
    EXPECT_NEAR(mean(keep), budget, 1e-9 * budget);
    EXPECT_GT(keep[0], keep[1]);
    EXPECT_GT(keep[1], keep[2]);
    EXPECT_DOUBLE_EQ(keep[2], keep[3]);
    EXPECT_NEAR(keep[0], 0.12 * 4 / 8, 1e-12);
    EXPECT_EQ(testing::tensor(d, name).reason, "dagc");
  }
  EXPECT_EQ(uniform_codec(d, "fc.bias"), "none");
  ASSERT_TRUE(d.predicted_communicate_seconds);
  EXPECT_GT(*d.predicted_communicate_seconds, 0.0);
}

TEST_P(DagcPolicies, TrafficBudgetReplacesTheBandwidthChoice) {
  PolicySettings s = dagc_settings();
  s.traffic_budget = 0.2;
  s.ladder = {"none", "topk:density=0.01,values=fp16"};
  const PolicyDecision d = decide(s, skewed_job({3, 1}));
  const std::vector<double> keep = densities(d, "conv.weight");
  EXPECT_NEAR(mean(keep), 0.2, 1e-9 * 0.2);
  EXPECT_NEAR(keep[0], 0.3, 1e-12);
  EXPECT_NE(testing::tensor(d, "conv.weight").codec_per_node[0].find("values=fp16"),
            std::string::npos);
}

TEST_P(DagcPolicies, RespectsTheMinimumKeepFraction) {
  PolicySettings s = dagc_settings();
  s.traffic_budget = 0.01;
  s.min_keep_fraction = 0.005;
  const PolicyDecision d = decide(s, skewed_job({1000, 1, 1, 1}));
  const std::vector<double> keep = densities(d, "conv.weight");
  EXPECT_NEAR(mean(keep), 0.01, 1e-9 * 0.01);
  for (size_t node = 1; node < keep.size(); ++node) EXPECT_DOUBLE_EQ(keep[node], 0.005);
  EXPECT_NEAR(keep[0], 0.04 - 3 * 0.005, 1e-12);
}

TEST_P(DagcPolicies, EqualDataGivesTheUniformDensity) {
  const PolicyDecision d = decide(dagc_settings(), skewed_job({2, 2, 2, 2}));
  for (const double k : densities(d, "conv.weight")) EXPECT_DOUBLE_EQ(k, 0.03);
  EXPECT_EQ(testing::tensor(d, "conv.weight").reason, "dagc");
}

TEST_P(DagcPolicies, StaysUniformWithoutADataVolumeSample) {
  Measurements m = skewed_job({4, 2, 1, 1});
  m.node_samples.pop_back();
  const PolicyDecision d = decide(dagc_settings(), m);
  EXPECT_EQ(uniform_codec(d, "conv.weight"), canonical("topk:density=0.03"));
  EXPECT_EQ(testing::tensor(d, "conv.weight").reason, "no data-volume sample");
}

TEST_P(DagcPolicies, FallsBackWithoutALinkSampleAndHonoursWarmUp) {
  PolicySettings s = dagc_settings();
  s.default_codec = "fp16";
  Measurements m = skewed_job({4, 2, 1, 1});
  m.links.clear();
  EXPECT_EQ(testing::tensor(decide(s, m), "conv.weight").reason, "no bandwidth sample");
  s.warmup_steps = 1000;
  EXPECT_EQ(uniform_codec(decide(s, skewed_job({4, 2, 1, 1})), "conv.weight"), "none");
}

TEST_P(DagcPolicies, LeavesADenseBandwidthChoiceAlone) {
  PolicySettings s = dagc_settings();
  s.target_communicate_seconds = 10.0;
  const PolicyDecision d = decide(s, skewed_job({4, 2, 1, 1}));
  EXPECT_EQ(uniform_codec(d, "conv.weight"), "none");
  EXPECT_EQ(testing::tensor(d, "conv.weight").reason, "bandwidth");
}

INSTANTIATE_TEST_SUITE_P(Both, DagcPolicies, ::testing::Values("dagc-r", "dagc-a"));

TEST(DagcPolicy, ApproximationStaysCloseToTheExactAllocation) {
  PolicySettings s = settings("dagc-r");
  s.traffic_budget = 0.3;
  const Measurements m = skewed_job({30, 3, 1, 1});  // node 0 clips at 1
  const std::vector<double> exact = densities(decide(s, m), "conv.weight");
  s.name = "dagc-a";
  const std::vector<double> approx = densities(decide(s, m), "conv.weight");
  ASSERT_EQ(exact.size(), approx.size());
  EXPECT_DOUBLE_EQ(exact[0], 1.0);
  EXPECT_DOUBLE_EQ(approx[0], 1.0);
  for (size_t node = 0; node < exact.size(); ++node) EXPECT_NEAR(approx[node], exact[node], 0.02);
}

TEST(DagcPolicy, NamesItsVariant) {
  EXPECT_EQ(testing::make(settings("dagc-r"))->name(), "dagc-r");
  EXPECT_EQ(testing::make(settings("dagc-a"))->name(), "dagc-a");
}

}  // namespace
}  // namespace gradgate::control
