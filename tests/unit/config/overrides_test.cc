// Overrides: GRADGATE_* variables over the file, --set over both, and bad overrides named.
#include "config_test_support.h"

namespace gradgate::gateway {
namespace {

using ::testing::ElementsAre;
using testing::error_lines;
using ::testing::HasSubstr;
using testing::kMinimalYaml;
using testing::parse;
using ::testing::StartsWith;

constexpr char kTwoNodes[] =
    "job:\n  nodes: [\"127.0.0.1:29500\", \"127.0.0.1:29501\"]\n"
    "compression:\n  codec: fp16\n";

TEST(Overrides, EnvironmentOverridesTheFile) {
  const auto config = parse(kTwoNodes, {{"GRADGATE_JOB_NODE_RANK", "1"},
                                        {"GRADGATE_COMPRESSION_CODEC", "topk:density=0.1"},
                                        {"GRADGATE_TRANSPORT_RECONNECT_MAX_MS", "900"}});
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->node_rank, 1u);
  EXPECT_EQ(config->codec, "topk:density=0.1");
  EXPECT_EQ(config->reconnect_max, std::chrono::milliseconds(900));
}

TEST(Overrides, SetOverridesTheEnvironmentAndTheLastSetWins) {
  const auto config = parse(
      kTwoNodes, {{"GRADGATE_COMPRESSION_CODEC", "bf16"}},
      {"compression.codec=none", "logging.level=debug", "compression.codec=qsgd:bits=2,workers=4"});
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->codec, "qsgd:bits=2,workers=4");
  EXPECT_EQ(config->log_level, "debug");
}

TEST(Overrides, ControllerRequestTimeoutFromTheEnvironmentAndSet) {
  const auto from_env = parse(kTwoNodes, {{"GRADGATE_CONTROL_REQUEST_TIMEOUT_MS", "30000"}});
  ASSERT_TRUE(from_env.ok()) << from_env.status().message();
  EXPECT_EQ(from_env->control_request_timeout, std::chrono::milliseconds(30000));
  const auto from_set = parse(kTwoNodes, {{"GRADGATE_CONTROL_REQUEST_TIMEOUT_MS", "30000"}},
                              {"control.request_timeout_ms=500"});
  ASSERT_TRUE(from_set.ok()) << from_set.status().message();
  EXPECT_EQ(from_set->control_request_timeout, std::chrono::milliseconds(500));
  EXPECT_THAT(
      error_lines(parse(kTwoNodes, {}, {"control.request_timeout_ms=0"})),
      ElementsAre("gateway.yaml: control.request_timeout_ms: must be in 100..600000, got 0"));
}

TEST(Overrides, NodesTakeACommaList) {
  const auto from_env =
      parse(kMinimalYaml, {{"GRADGATE_JOB_NODES", "127.0.0.1:1,127.0.0.1:2, 127.0.0.1:3"}});
  ASSERT_TRUE(from_env.ok()) << from_env.status().message();
  EXPECT_EQ(from_env->nodes,
            (std::vector<net::Endpoint>{{"127.0.0.1", 1}, {"127.0.0.1", 2}, {"127.0.0.1", 3}}));
  const auto from_set = parse(kMinimalYaml, {{"GRADGATE_JOB_NODES", "127.0.0.1:1,127.0.0.1:2"}},
                              {"job.nodes=10.0.0.9:7"});
  ASSERT_TRUE(from_set.ok()) << from_set.status().message();
  EXPECT_EQ(from_set->nodes, (std::vector<net::Endpoint>{{"10.0.0.9", 7}}));
}

TEST(Overrides, NodesMayComeOnlyFromTheEnvironment) {
  const auto config = parse("", {{"GRADGATE_JOB_NODES", "127.0.0.1:5"}});
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->listen, (net::Endpoint{"127.0.0.1", 5}));
}

TEST(Overrides, ListenDefaultFollowsAnOverriddenRank) {
  const auto config = parse(kTwoNodes, {}, {"job.node_rank=1"});
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->listen, (net::Endpoint{"127.0.0.1", 29501}));
}

TEST(Overrides, OtherGradgateVariablesAreIgnored) {
  const auto config = parse(kMinimalYaml, {{"GRADGATE_LIBRARY", "/opt/lib.so"},
                                           {"GRADGATE_DATA_DIR", "/data"},
                                           {"GRADGATE_JOBS", "x"},
                                           {"HOME", "/root"},
                                           {"JOB_NODE_RANK", "9"}});
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->node_rank, 0u);
}

TEST(Overrides, UnknownKeyOfAKnownSectionIsAnError) {
  const auto result = parse(kMinimalYaml, {{"GRADGATE_JOB_NODERANK", "1"}});
  EXPECT_THAT(error_lines(result),
              ElementsAre("environment GRADGATE_JOB_NODERANK: job.noderank: unknown key"));
  EXPECT_THAT(error_lines(parse(kMinimalYaml, {{"GRADGATE_JOB_node_rank", "1"}})),
              ElementsAre(HasSubstr("the variable is GRADGATE_JOB_NODE_RANK")));
}

TEST(Overrides, BadEnvironmentValueNamesTheVariable) {
  const auto result = parse(
      kTwoNodes, {{"GRADGATE_JOB_NODE_RANK", "one"}, {"GRADGATE_JOB_NODES", "127.0.0.1:1,nope"}});
  EXPECT_THAT(
      error_lines(result),
      ElementsAre(StartsWith("environment GRADGATE_JOB_NODES: job.nodes[1]: \"nope\" is not "
                             "host:port"),
                  StartsWith("environment GRADGATE_JOB_NODE_RANK: job.node_rank: must be a "
                             "non-negative integer, got \"one\"")));
}

TEST(Overrides, BadSetTextsAreNamed) {
  const auto result = parse(kTwoNodes, {},
                            {"job.node_rank", "compression.codex=fp16", "transport.listen=:1",
                             "collective.timeout_ms=-5"});
  EXPECT_THAT(error_lines(result),
              ElementsAre("--set \"job.node_rank\": expected section.key=value",
                          "--set \"compression.codex=fp16\": compression.codex: unknown key",
                          StartsWith("--set \"transport.listen=:1\": transport.listen: \":1\" is "
                                     "not host:port"),
                          StartsWith("--set \"collective.timeout_ms=-5\": collective.timeout_ms: "
                                     "must be a non-negative integer")));
}

TEST(Overrides, RulesApplyAfterOverrides) {
  const auto result =
      parse(kTwoNodes, {{"GRADGATE_JOB_NODE_RANK", "5"}}, {"transport.reconnect_min_ms=3000"});
  EXPECT_THAT(error_lines(result),
              ElementsAre(StartsWith("gateway.yaml: job.node_rank: 5 is out of range"),
                          StartsWith("gateway.yaml: transport.reconnect_max_ms: must be >= "
                                     "reconnect_min_ms (2000 < 3000)")));
}

TEST(Overrides, AFileErrorIsReportedEvenWhenAnOverrideSetsTheKey) {
  const auto result =
      parse(std::string(kMinimalYaml) + "  node_rank: x\n", {{"GRADGATE_JOB_NODE_RANK", "0"}});
  EXPECT_THAT(error_lines(result), ElementsAre(StartsWith("gateway.yaml: job.node_rank: ")));
}

}  // namespace
}  // namespace gradgate::gateway
