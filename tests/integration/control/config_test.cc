// The controller's configuration: the shipped example loads, every problem names its key path,
// and the environment and --set override the file in that order.
#include <gtest/gtest.h>

#include "control/config/control_config.h"

namespace gradgate::control {
namespace {

Result<ControlConfig> parse(const std::string& yaml,
                            const std::map<std::string, std::string>& env = {},
                            const std::vector<std::string>& overrides = {}) {
  return parse_control_config(yaml, "control.yaml", env, overrides);
}

void expect_error(const Result<ControlConfig>& config, const std::string& part) {
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(config.status().message().find(part), std::string::npos) << config.status().message();
}

TEST(ControlConfigTest, ShippedExampleLoadsWithItsDocumentedValues) {
  auto config = load_control_config(GRADGATE_SOURCE_DIR "/config/control.yaml");
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  EXPECT_EQ(config->listen_host, "127.0.0.1");
  EXPECT_EQ(config->listen_port, 9400);
  EXPECT_EQ(config->max_connections, 4096u);
  EXPECT_EQ(config->token_env, "GRADGATE_API_TOKEN");
  EXPECT_EQ(config->stale_after, std::chrono::milliseconds(5000));
  EXPECT_EQ(config->forget_after, std::chrono::milliseconds(3600000));
  EXPECT_EQ(config->policy.name, "static");
  EXPECT_EQ(config->policy.default_codec, "topk:density=0.01");
  EXPECT_EQ(config->policy.ladder.size(), 7u);
  EXPECT_FALSE(config->policy.traffic_budget.has_value());
  EXPECT_EQ(config->min_lead_steps, 4u);
  EXPECT_DOUBLE_EQ(config->lead_seconds, 1.0);
}

TEST(ControlConfigTest, MissingFileIsNotFound) {
  auto config = load_control_config("/nonexistent/control.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), ErrorCode::kNotFound);
}

TEST(ControlConfigTest, EveryProblemNamesItsKeyPath) {
  auto config = parse(R"(
server: {listen: "127.0.0.1:99999", colour: blue, max_connections: 0}
nodes: {stale_after_ms: -5}
policy:
  policy: fastest
  ladder: [none, {a: 1}]
  rules: [{codec: none}]
log: {format: xml}
extra: {}
)");
  expect_error(config, "server.listen:");
  expect_error(config, "server.colour: unknown key");
  expect_error(config, "server.max_connections:");
  expect_error(config, "nodes.stale_after_ms:");
  expect_error(config, "policy.policy: expected static | bandwidth | dagc-r | dagc-a");
  expect_error(config, "policy.ladder[1]: must be a single value");
  expect_error(config, "policy.rules[0].glob: missing");
  expect_error(config, "log.format:");
  expect_error(config, "extra: unknown section");
}

// The policy's counts stay within what PUT /v1/policy takes (a signed 64-bit integer), so that
// settings saved to policy.settings_file read back.
TEST(ControlConfigTest, PolicyCountsStayWithinWhatTheApiTakes) {
  expect_error(parse("policy: {warmup_steps: 9223372036854775808}"), "policy.warmup_steps:");
  expect_error(parse("policy: {min_compress_elements: 18446744073709551615}"),
               "policy.min_compress_elements:");
  auto config = parse("policy: {warmup_steps: 9223372036854775807}");
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  EXPECT_EQ(config->policy.warmup_steps, 9223372036854775807u);
}

TEST(ControlConfigTest, ARuleThatIsNoMappingIsNamedWithItsShape) {
  expect_error(parse("policy: {rules: [\"*.bias\"]}"),
               "policy.rules[0]: must be a mapping with glob, codec");
}

TEST(ControlConfigTest, NestingBeyondTheYamlReadersLimitSaysSo) {
  expect_error(parse("policy: " + std::string(2000, '[') + std::string(2000, ']')),
               "control.yaml: invalid YAML: nested more than ");
}

TEST(ControlConfigTest, PolicySettingsAreCheckedByThePolicyEngine) {
  expect_error(parse("policy: {ladder: [none, \"topk:density=2\"]}"), "policy.ladder[1]:");
  expect_error(parse("policy: {traffic_budget: 1.5}"), "policy.traffic_budget:");
  expect_error(parse("nodes: {report_interval_ms: 2000, stale_after_ms: 1000}"),
               "nodes.stale_after_ms: must be at least nodes.report_interval_ms");
  expect_error(parse("nodes: {stale_after_ms: 5000, forget_after_ms: 1000}"),
               "nodes.forget_after_ms: must be 0 (never forget) or at least nodes.stale_after_ms");
  EXPECT_TRUE(parse("nodes: {forget_after_ms: 0}").ok());
}

TEST(ControlConfigTest, EnvironmentThenSetOverrideTheFile) {
  auto config =
      parse("policy: {policy: bandwidth, min_lead_steps: 2}\nnodes: {stale_after_ms: 3000}",
            {{"GRADGATE_NODES_STALE_AFTER_MS", "9000"},
             {"GRADGATE_POLICY_MIN_LEAD_STEPS", "6"},
             {"GRADGATE_API_TOKEN", "not configuration"}},
            {"policy.min_lead_steps=8", "policy.ladder=[none, \"topk:density=0.05\"]",
             "policy.rules=[{glob: \"*.bias\", codec: none}]", "policy.traffic_budget=0.2",
             "policy.traffic_budget=null", "server.listen=127.0.0.1:0"});
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  EXPECT_EQ(config->stale_after, std::chrono::milliseconds(9000));
  EXPECT_EQ(config->min_lead_steps, 8u);
  EXPECT_EQ(config->policy.ladder, (std::vector<std::string>{"none", "topk:density=0.05"}));
  ASSERT_EQ(config->policy.rules.size(), 1u);
  EXPECT_EQ(config->policy.rules[0].glob, "*.bias");
  EXPECT_EQ(config->policy.rules[0].codec, "none");
  EXPECT_FALSE(config->policy.traffic_budget.has_value());
  EXPECT_EQ(config->listen_port, 0);
}

TEST(ControlConfigTest, BadOverridesAreReported) {
  expect_error(parse("", {{"GRADGATE_POLICY_COLOUR", "red"}}), "GRADGATE_POLICY_COLOUR");
  expect_error(parse("", {}, {"policy.nope=1"}), "policy.nope: unknown key");
  expect_error(parse("", {}, {"no-equals-sign"}), "expected section.key=value");
  expect_error(parse("", {}, {"policy.ladder=[none"}), "policy.ladder:");
}

}  // namespace
}  // namespace gradgate::control
