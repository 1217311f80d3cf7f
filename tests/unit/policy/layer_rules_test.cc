#include "control/policy/layer_rules.h"

#include <gtest/gtest.h>

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

TEST(LayerRules, TheFirstMatchingGlobWins) {
  auto rules =
      parse_layer_rules({{.glob = "fc.*", .codec = "fp16"}, {.glob = "*.weight", .codec = "bf16"}});
  ASSERT_TRUE(rules.ok());
  EXPECT_EQ(find_layer_rule(*rules, "fc.weight")->glob, "fc.*");
  EXPECT_EQ(find_layer_rule(*rules, "conv.weight")->glob, "*.weight");
  EXPECT_EQ(find_layer_rule(*rules, "layer1.0.bn.bias"), nullptr);
  EXPECT_EQ(find_layer_rule(*rules, "fc"), nullptr);
}

TEST(LayerRules, ARuleThatIsTheFirstMatchOfNoTensorIsUnused) {
  const std::vector<TensorSample> buckets = {{.name = "ddp.7.bucket0.1000.fp32"},
                                             {.name = "ddp.7.bucket1.5000.fp32"}};
  const std::vector<LayerRule> rules = {{.glob = "*.bias", .codec = "none"},
                                        {.glob = "*.bucket0.*", .codec = "fp16"},
                                        {.glob = "ddp.*", .max_density = 0.1},
                                        {.glob = "*.bucket1.*", .codec = "bf16"}};
  // *.bias matches no name; *.bucket1.* matches bucket 1, which ddp.* takes first.
  EXPECT_EQ(unused_layer_rules(rules, buckets),
            (std::vector<std::string>{"*.bias", "*.bucket1.*"}));
  EXPECT_EQ(unused_layer_rules(rules, {}).size(), rules.size());
  EXPECT_TRUE(unused_layer_rules({}, buckets).empty());
}

TEST(LayerRules, AForcedCodecWinsOverTheBandwidthChoice) {
  PolicySettings s = settings("bandwidth");
  s.target_communicate_seconds = 0.05;
  s.rules = {{.glob = "fc.*", .codec = "qsgd:bits=8"}};
  const PolicyDecision d = decide(s, job(4, kGigabitPerSecond));
  EXPECT_EQ(uniform_codec(d, "fc.weight"), canonical("qsgd:bits=8"));
  EXPECT_EQ(testing::tensor(d, "fc.weight").reason, "rule fc.*");
  // Rules apply last: a small tensor that matches is forced too.
  EXPECT_EQ(uniform_codec(d, "fc.bias"), canonical("qsgd:bits=8"));
  // The ladder counts the forced traffic: conv.weight alone must now shrink further than the
  // topk:density=0.03 that meets the target without the rule.
  EXPECT_EQ(uniform_codec(d, "conv.weight"), canonical("topk:density=0.01"));
  EXPECT_LE(*d.predicted_communicate_seconds, s.target_communicate_seconds);
}

TEST(LayerRules, DensityBoundsClampTheChosenDensity) {
  PolicySettings s = settings("static");
  s.default_codec = "topk:density=0.03";
  s.rules = {{.glob = "conv.*", .max_density = 0.01}, {.glob = "fc.*", .min_density = 0.05}};
  const PolicyDecision d = decide(s, job(4, kGigabitPerSecond));
  EXPECT_DOUBLE_EQ(density_of(uniform_codec(d, "conv.weight")), 0.01);
  EXPECT_EQ(testing::tensor(d, "conv.weight").reason, "rule conv.*");
  EXPECT_DOUBLE_EQ(density_of(uniform_codec(d, "fc.weight")), 0.05);
  // Bounds leave dense codecs dense.
  EXPECT_EQ(uniform_codec(d, "fc.bias"), "none");
  EXPECT_EQ(testing::tensor(d, "fc.bias").reason, "small tensor");
}

TEST(LayerRules, BoundsWithinWhichTheChoiceLiesChangeNothing) {
  PolicySettings s = settings("bandwidth");
  s.target_communicate_seconds = 0.05;
  s.rules = {{.glob = "conv.*", .min_density = 0.01, .max_density = 0.1}};
  const PolicyDecision d = decide(s, job(4, kGigabitPerSecond));
  EXPECT_EQ(uniform_codec(d, "conv.weight"), canonical("topk:density=0.03"));
  EXPECT_EQ(testing::tensor(d, "conv.weight").reason, "bandwidth");
}

TEST(LayerRules, DagcKeepsEveryNodeWithinTheRuleBounds) {
  PolicySettings s = settings("dagc-r");
  s.traffic_budget = 0.02;
  s.rules = {{.glob = "conv.*", .min_density = 0.01, .max_density = 0.03}};
  Measurements m = job(4, kGigabitPerSecond);
  m.node_samples[0].data_volume = 100.0;
  const PolicyDecision d = decide(s, m);
  double sum = 0.0;
  for (const std::string& codec : testing::tensor(d, "conv.weight").codec_per_node) {
    const double k = density_of(codec);
    EXPECT_GE(k, 0.01);
    EXPECT_LE(k, 0.03);
    sum += k;
  }
  EXPECT_NEAR(sum, 4 * 0.02, 1e-9);
  // A forced codec is not split.
  s.rules = {{.glob = "conv.*", .codec = "topk:density=0.05"}};
  EXPECT_EQ(uniform_codec(decide(s, m), "conv.weight"), canonical("topk:density=0.05"));
}

TEST(LayerRules, AForcedCodecAppliesDuringWarmUp) {
  PolicySettings s = settings("static");
  s.default_codec = "fp16";
  s.warmup_steps = 10;
  s.rules = {{.glob = "conv.*", .codec = "bf16"}};
  const PolicyDecision d = decide(s, job(2, kGigabitPerSecond, 3));
  EXPECT_EQ(uniform_codec(d, "conv.weight"), "bf16");
  EXPECT_EQ(uniform_codec(d, "fc.weight"), "none");
}

}  // namespace
}  // namespace gradgate::control
