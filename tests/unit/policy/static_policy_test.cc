#include <gtest/gtest.h>

#include "policy_test_support.h"

namespace gradgate::control {
namespace {

using testing::canonical;
using testing::decide;
using testing::job;
using testing::kGigabitPerSecond;
using testing::settings;
using testing::uniform_codec;

TEST(StaticPolicy, EveryLargeTensorGetsTheConfiguredCodecOnEveryNode) {
  PolicySettings s = settings("static");
  s.default_codec = "qsgd:bits=4";
  const PolicyDecision d = decide(s, job(3, kGigabitPerSecond));
  ASSERT_EQ(d.tensors.size(), 3u);
  for (const std::string name : {"conv.weight", "fc.weight"}) {
    EXPECT_EQ(uniform_codec(d, name), canonical("qsgd:bits=4"));
    EXPECT_EQ(testing::tensor(d, name).reason, "static");
    EXPECT_EQ(testing::tensor(d, name).codec_per_node.size(), 3u);
  }
  EXPECT_EQ(uniform_codec(d, "fc.bias"), "none");
  EXPECT_EQ(testing::tensor(d, "fc.bias").reason, "small tensor");
}

TEST(StaticPolicy, IgnoresTheLinkButReportsItsPredictedTime) {
  PolicySettings s = settings("static");
  s.default_codec = "topk:density=0.01";
  const PolicyDecision fast = decide(s, job(2, 1000 * kGigabitPerSecond));
  const PolicyDecision slow = decide(s, job(2, kGigabitPerSecond));
  EXPECT_EQ(uniform_codec(fast, "conv.weight"), canonical("topk:density=0.01"));
  EXPECT_EQ(uniform_codec(slow, "conv.weight"), canonical("topk:density=0.01"));
  ASSERT_TRUE(fast.predicted_communicate_seconds && slow.predicted_communicate_seconds);
  EXPECT_NEAR(*slow.predicted_communicate_seconds / *fast.predicted_communicate_seconds, 1000,
              1e-6);
  EXPECT_FALSE(decide(s, job(2, 0.0)).predicted_communicate_seconds);
}

TEST(StaticPolicy, HonoursWarmUp) {
  PolicySettings s = settings("static");
  s.default_codec = "fp16";
  s.warmup_steps = 5;
  EXPECT_EQ(uniform_codec(decide(s, job(2, kGigabitPerSecond, 4)), "conv.weight"), "none");
  EXPECT_EQ(uniform_codec(decide(s, job(2, kGigabitPerSecond, 5)), "conv.weight"), "fp16");
}

}  // namespace
}  // namespace gradgate::control
