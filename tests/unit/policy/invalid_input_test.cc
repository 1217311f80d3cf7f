#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "policy_test_support.h"

namespace gradgate::control {
namespace {

using testing::job;
using testing::kGigabitPerSecond;
using testing::settings;

struct BadSetting {
  std::string field;
  std::function<void(PolicySettings&)> spoil;
};

class InvalidSettings : public ::testing::TestWithParam<BadSetting> {};

TEST_P(InvalidSettings, AreRefusedNamingTheSetting) {
  PolicySettings s = settings("bandwidth");
  GetParam().spoil(s);
  auto policy = make_policy(s);
  ASSERT_FALSE(policy.ok());
  EXPECT_EQ(policy.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(policy.status().message().rfind(GetParam().field + ":", 0), 0u)
      << policy.status().message();
}

const double kNan = std::nan("");

INSTANTIATE_TEST_SUITE_P(
    Policy, InvalidSettings,
    ::testing::Values(
        BadSetting{"name", [](PolicySettings& s) { s.name = "greedy"; }},
        BadSetting{"default_codec", [](PolicySettings& s) { s.default_codec = "zip"; }},
        BadSetting{"ladder", [](PolicySettings& s) { s.ladder.clear(); }},
        BadSetting{"ladder[1]", [](PolicySettings& s) { s.ladder[1] = "topk:density=2"; }},
        BadSetting{"target_communicate_seconds",
                   [](PolicySettings& s) { s.target_communicate_seconds = 0.0; }},
        BadSetting{"target_communicate_seconds",
                   [](PolicySettings& s) { s.target_communicate_seconds = kNan; }},
        BadSetting{"traffic_budget", [](PolicySettings& s) { s.traffic_budget = 1.5; }},
        BadSetting{"traffic_budget", [](PolicySettings& s) { s.traffic_budget = 0.0; }},
        BadSetting{"min_keep_fraction", [](PolicySettings& s) { s.min_keep_fraction = -0.1; }},
        BadSetting{"default_codec_bytes_per_second",
                   [](PolicySettings& s) { s.default_codec_bytes_per_second = 0.0; }},
        BadSetting{"rules[0].glob", [](PolicySettings& s) { s.rules = {{.codec = "fp16"}}; }},
        BadSetting{"rules[0]", [](PolicySettings& s) { s.rules = {{.glob = "*"}}; }},
        BadSetting{"rules[1].codec",
                   [](PolicySettings& s) {
                     s.rules = {{.glob = "a*", .codec = "fp16"}, {.glob = "*", .codec = "x"}};
                   }},
        BadSetting{"rules[0].max_density",
                   [](PolicySettings& s) { s.rules = {{.glob = "*", .max_density = kNan}}; }},
        BadSetting{"rules[0].min_density", [](PolicySettings& s) {
                     s.rules = {{.glob = "*", .min_density = 0.5, .max_density = 0.1}};
                   }}));

struct BadMeasurement {
  std::string field;
  std::function<void(Measurements&)> spoil;
};

class InvalidMeasurements : public ::testing::TestWithParam<BadMeasurement> {};

TEST_P(InvalidMeasurements, AreRefusedNamingTheField) {
  for (const std::string name : {"static", "bandwidth", "dagc-r", "dagc-a"}) {
    Measurements m = job(4, kGigabitPerSecond);
    GetParam().spoil(m);
    auto decision = testing::make(settings(name))->decide(m);
    ASSERT_FALSE(decision.ok()) << name;
    EXPECT_EQ(decision.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(decision.status().message().rfind("measurements." + GetParam().field + ":", 0), 0u)
        << decision.status().message();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Policy, InvalidMeasurements,
    ::testing::Values(
        BadMeasurement{"nodes", [](Measurements& m) { m.nodes = 0; }},
        // Every sample is fine, but the decision would hold 65536 x 64 + 65536 codecs.
        BadMeasurement{"tensors",
                       [](Measurements& m) {
                         m.nodes = 65536;
                         m.tensors.resize(65, m.tensors[0]);
                         for (size_t i = 0; i < m.tensors.size(); ++i) {
                           m.tensors[i].name = "layer" + std::to_string(i);
                         }
                       }},
        BadMeasurement{"links[1].goodput_bytes_per_second",
                       [](Measurements& m) { m.links[1].goodput_bytes_per_second = 0.0; }},
        BadMeasurement{"links[0].goodput_bytes_per_second",
                       [](Measurements& m) { m.links[0].goodput_bytes_per_second = -1.0; }},
        BadMeasurement{"links[0].goodput_bytes_per_second",
                       [](Measurements& m) { m.links[0].goodput_bytes_per_second = kNan; }},
        BadMeasurement{"links[0].goodput_bytes_per_second",
                       [](Measurements& m) {
                         m.links[0].goodput_bytes_per_second =
                             std::numeric_limits<double>::infinity();
                       }},
        BadMeasurement{"links[0].rtt_seconds",
                       [](Measurements& m) { m.links[0].rtt_seconds = -1e-3; }},
        BadMeasurement{"links[2].to_node", [](Measurements& m) { m.links[2].to_node = 4; }},
        BadMeasurement{"links[0].to_node",
                       [](Measurements& m) { m.links[0].to_node = m.links[0].from_node; }},
        BadMeasurement{"node_samples[3].data_volume",
                       [](Measurements& m) { m.node_samples[3].data_volume = kNan; }},
        BadMeasurement{"node_samples[0].data_volume",
                       [](Measurements& m) { m.node_samples[0].data_volume = 0.0; }},
        BadMeasurement{"node_samples[1].node", [](Measurements& m) { m.node_samples[1].node = 0; }},
        BadMeasurement{"node_samples[1].node", [](Measurements& m) { m.node_samples[1].node = 9; }},
        BadMeasurement{"tensors[1].elements", [](Measurements& m) { m.tensors[1].elements = 0; }},
        BadMeasurement{"tensors[2].name", [](Measurements& m) { m.tensors[2].name = "fc.weight"; }},
        BadMeasurement{"tensors[0].rows",
                       [](Measurements& m) {
                         m.tensors[0].rows = 3;
                         m.tensors[0].cols = 5;
                       }},
        BadMeasurement{"codec_speeds[0].codec",
                       [](Measurements& m) { m.codec_speeds[0].codec = "zip"; }},
        BadMeasurement{"codec_speeds[1].codec",
                       [](Measurements& m) { m.codec_speeds[1].codec = "fp16"; }},
        BadMeasurement{"codec_speeds[1].encode_bytes_per_second",
                       [](Measurements& m) { m.codec_speeds[1].encode_bytes_per_second = 0.0; }},
        BadMeasurement{"codec_speeds[0].decode_bytes_per_second",
                       [](Measurements& m) { m.codec_speeds[0].decode_bytes_per_second = kNan; }}));

TEST(MissingMeasurements, AreNotErrors) {
  Measurements m = job(4, 0.0);
  m.node_samples.clear();
  m.codec_speeds.clear();
  for (const std::string name : {"static", "bandwidth", "dagc-r", "dagc-a"}) {
    auto decision = testing::make(settings(name))->decide(m);
    ASSERT_TRUE(decision.ok()) << name << ": " << decision.status().to_string();
    EXPECT_EQ(decision->tensors.size(), 3u);
  }
}

}  // namespace
}  // namespace gradgate::control
