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

// The predicted time of sending every tensor with `codec` (what the static policy reports).
double seconds_with(const std::string& codec, const Measurements& m) {
  PolicySettings s = settings("static");
  s.default_codec = codec;
  const PolicyDecision d = decide(s, m);
  EXPECT_TRUE(d.predicted_communicate_seconds);
  return d.predicted_communicate_seconds.value_or(0.0);
}

TEST(BandwidthPolicy, PicksTheMildestLadderEntryThatMeetsTheTargetOnASlowLink) {
  const Measurements m = job(4, kGigabitPerSecond);
  PolicySettings s = settings("bandwidth");
  s.target_communicate_seconds = 0.05;
  const PolicyDecision d = decide(s, m);

  EXPECT_EQ(uniform_codec(d, "conv.weight"), canonical("topk:density=0.03"));
  EXPECT_EQ(uniform_codec(d, "fc.weight"), canonical("topk:density=0.03"));
  EXPECT_EQ(testing::tensor(d, "conv.weight").reason, "bandwidth");
  ASSERT_TRUE(d.predicted_communicate_seconds);
  EXPECT_LE(*d.predicted_communicate_seconds, s.target_communicate_seconds);
  EXPECT_DOUBLE_EQ(*d.predicted_communicate_seconds, seconds_with("topk:density=0.03", m));
  // Every milder entry misses the target.
  for (const std::string milder : {"none", "fp16", "topk:density=0.1"}) {
    EXPECT_GT(seconds_with(milder, m), s.target_communicate_seconds) << milder;
  }
}

TEST(BandwidthPolicy, StaysDenseWhenDenseMeetsTheTarget) {
  PolicySettings s = settings("bandwidth");
  s.target_communicate_seconds = 10.0;
  const PolicyDecision d = decide(s, job(4, kGigabitPerSecond));
  EXPECT_EQ(uniform_codec(d, "conv.weight"), "none");
  EXPECT_EQ(testing::tensor(d, "conv.weight").reason, "bandwidth");
}

TEST(BandwidthPolicy, TakesTheStrongestEntryWhenNoneMeetsTheTarget) {
  PolicySettings s = settings("bandwidth");
  s.target_communicate_seconds = 1e-9;
  const PolicyDecision d = decide(s, job(4, kGigabitPerSecond));
  EXPECT_EQ(uniform_codec(d, "conv.weight"), canonical("topk:density=0.001"));
  EXPECT_EQ(testing::tensor(d, "conv.weight").reason, "bandwidth: target not met");
  EXPECT_GT(*d.predicted_communicate_seconds, s.target_communicate_seconds);
}

TEST(BandwidthPolicy, TheBottleneckLinkSetsTheTime) {
  PolicySettings s = settings("bandwidth");
  s.target_communicate_seconds = 0.05;
  Measurements m = job(4, 100 * kGigabitPerSecond);
  EXPECT_EQ(uniform_codec(decide(s, m), "conv.weight"), "none");
  m.links[2].goodput_bytes_per_second = kGigabitPerSecond;
  EXPECT_EQ(uniform_codec(decide(s, m), "conv.weight"), canonical("topk:density=0.03"));
}

TEST(BandwidthPolicy, BreakEvenTurnsCompressionOffOnAFastLink) {
  PolicySettings s = settings("bandwidth");
  s.target_communicate_seconds = 1e-9;  // unreachable: the strongest entry is tried
  Measurements m = job(4, 100e9);
  m.codec_speeds = {
      {.codec = "fp16", .encode_bytes_per_second = 4e9, .decode_bytes_per_second = 4e9},
      {.codec = "topk", .encode_bytes_per_second = 2e9, .decode_bytes_per_second = 8e9}};
  const PolicyDecision fast = decide(s, m);
  for (const std::string name : {"conv.weight", "fc.weight"}) {
    EXPECT_EQ(uniform_codec(fast, name), "none") << name;
    EXPECT_EQ(testing::tensor(fast, name).reason, "break-even: compression slower than the link");
  }
  EXPECT_DOUBLE_EQ(*fast.predicted_communicate_seconds, seconds_with("none", m));

  // The same codecs pay on a slow link.
  m.links = job(4, kGigabitPerSecond).links;
  EXPECT_EQ(uniform_codec(decide(s, m), "conv.weight"), canonical("topk:density=0.001"));
}

TEST(BandwidthPolicy, BreakEvenAssumesTheDefaultSpeedForAnUnmeasuredCodec) {
  PolicySettings s = settings("bandwidth");
  s.target_communicate_seconds = 1e-9;
  Measurements m = job(4, 10e9);
  m.codec_speeds.clear();
  s.default_codec_bytes_per_second = 1e12;
  EXPECT_EQ(uniform_codec(decide(s, m), "conv.weight"), canonical("topk:density=0.001"));
  s.default_codec_bytes_per_second = 1e9;
  EXPECT_EQ(uniform_codec(decide(s, m), "conv.weight"), "none");
}

TEST(BandwidthPolicy, KeepsSmallTensorsDense) {
  PolicySettings s = settings("bandwidth");
  s.target_communicate_seconds = 1e-9;
  s.min_compress_elements = 2u << 20;
  const PolicyDecision d = decide(s, job(4, kGigabitPerSecond));
  EXPECT_EQ(uniform_codec(d, "conv.weight"), canonical("topk:density=0.001"));
  for (const std::string name : {"fc.weight", "fc.bias"}) {
    EXPECT_EQ(uniform_codec(d, name), "none") << name;
    EXPECT_EQ(testing::tensor(d, name).reason, "small tensor");
  }
}

TEST(BandwidthPolicy, HonoursWarmUp) {
  PolicySettings s = settings("bandwidth");
  s.target_communicate_seconds = 0.05;
  s.warmup_steps = 100;
  const PolicyDecision warming = decide(s, job(4, kGigabitPerSecond, 99));
  for (const TensorDecision& t : warming.tensors) {
    EXPECT_EQ(t.reason, "warm-up") << t.tensor;
    for (const std::string& codec : t.codec_per_node) EXPECT_EQ(codec, "none");
  }
  const PolicyDecision warm = decide(s, job(4, kGigabitPerSecond, 100));
  EXPECT_EQ(uniform_codec(warm, "conv.weight"), canonical("topk:density=0.03"));
}

TEST(BandwidthPolicy, FallsBackToTheDefaultCodecWithoutALinkSample) {
  PolicySettings s = settings("bandwidth");
  s.default_codec = "fp16";
  const PolicyDecision d = decide(s, job(4, 0.0));
  EXPECT_EQ(uniform_codec(d, "conv.weight"), "fp16");
  EXPECT_EQ(testing::tensor(d, "conv.weight").reason, "no bandwidth sample");
  EXPECT_EQ(uniform_codec(d, "fc.bias"), "none");
  EXPECT_FALSE(d.predicted_communicate_seconds);
}

}  // namespace
}  // namespace gradgate::control
