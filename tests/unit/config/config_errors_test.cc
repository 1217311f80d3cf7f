// Bad files: every kind of problem is reported with the file name and key path, all at once.
#include "config_test_support.h"

namespace gradgate::gateway {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using testing::error_lines;
using ::testing::HasSubstr;
using testing::kMinimalYaml;
using ::testing::Not;
using testing::parse;
using ::testing::StartsWith;

// The single problem of `yaml` (the minimal file plus `extra`, when given).
std::string only_error(const std::string& yaml) {
  const auto result = parse(yaml);
  const auto lines = error_lines(result);
  EXPECT_EQ(result.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(lines.size(), 1u) << result.status().message();
  return lines.empty() ? "" : lines.front();
}

std::string only_error_with(const std::string& extra) {
  return only_error(std::string(kMinimalYaml) + extra);
}

TEST(ConfigErrors, BadNodeEntryNamesFileIndexAndText) {
  EXPECT_THAT(only_error("job:\n  nodes: [\"127.0.0.1:1\", \"abc\"]\n"),
              StartsWith("gateway.yaml: job.nodes[1]: \"abc\" is not host:port (line 2"));
}

TEST(ConfigErrors, AJobSizeAbove65536IsRefused) {
  EXPECT_THAT(error_lines(parse("job:\n  size: 65537\n")),
              Contains(HasSubstr("job.size: \"65537\" is out of range 0..65536")));
}

TEST(ConfigErrors, PortAboveRangeIsRefused) {
  EXPECT_THAT(only_error("job:\n  nodes: [\"127.0.0.1:70000\"]\n"),
              StartsWith("gateway.yaml: job.nodes[0]: port 70000 in \"127.0.0.1:70000\" is out of "
                         "range 0..65535"));
  EXPECT_THAT(only_error_with("transport:\n  listen: 0.0.0.0:65536\n"),
              HasSubstr("transport.listen: port 65536"));
}

TEST(ConfigErrors, UnknownCodecNamesTheKey) {
  EXPECT_THAT(only_error_with("compression:\n  codec: tpok\n"),
              AllOf(StartsWith("gateway.yaml: compression.codec: "), HasSubstr("unknown codec"),
                    HasSubstr("tpok")));
  EXPECT_THAT(only_error_with("compression:\n  codec: \"topk:density=2\"\n"),
              AllOf(StartsWith("gateway.yaml: compression.codec: "), HasSubstr("density")));
}

TEST(ConfigErrors, ReconnectMaxBelowMin) {
  EXPECT_THAT(only_error_with("transport:\n  reconnect_min_ms: 100\n  reconnect_max_ms: 10\n"),
              StartsWith("gateway.yaml: transport.reconnect_max_ms: must be >= reconnect_min_ms"));
}

TEST(ConfigErrors, PeerTimeoutBelowASecondIsRefusedZeroTurnsItOff) {
  EXPECT_THAT(only_error_with("transport:\n  peer_timeout_ms: 200\n"),
              StartsWith("gateway.yaml: transport.peer_timeout_ms: must be 0 (the kernel's "
                         "limits) or at least 1000, got 200"));
  for (const char* accepted : {"0", "1000"}) {
    const auto loaded =
        parse(std::string(kMinimalYaml) + "transport:\n  peer_timeout_ms: " + accepted + "\n");
    ASSERT_TRUE(loaded.ok()) << accepted << ": " << loaded.status().to_string();
    EXPECT_EQ(loaded->peer_timeout.count(), std::stoll(accepted));
  }
}

TEST(ConfigErrors, UnknownKeysAndSections) {
  EXPECT_THAT(only_error_with("compression:\n  codex: fp16\n"),
              StartsWith("gateway.yaml: compression.codex: unknown key (line 4, column 3)"));
  EXPECT_THAT(only_error_with("compresion:\n  codec: fp16\n"),
              StartsWith("gateway.yaml: compresion: unknown section"));
}

TEST(ConfigErrors, WrongShapes) {
  EXPECT_THAT(only_error("job:\n  nodes: \"127.0.0.1:1\"\n"),
              StartsWith("gateway.yaml: job.nodes: must be a list, not a single value"));
  EXPECT_THAT(only_error_with("  node_rank: [0]\n"),
              StartsWith("gateway.yaml: job.node_rank: must be a single value, not a list"));
  EXPECT_THAT(only_error_with("ingress:\n  socket: {path: x}\n"),
              StartsWith("gateway.yaml: ingress.socket: must be a single value, not a mapping"));
  EXPECT_THAT(only_error_with("  id:\n"),
              StartsWith("gateway.yaml: job.id: must be a single value, not empty"));
  EXPECT_THAT(only_error("job:\n  nodes: [[\"127.0.0.1:1\"]]\n"),
              StartsWith("gateway.yaml: job.nodes[0]: must be a single value, not a list"));
  EXPECT_THAT(only_error_with("logging: debug\n"),
              StartsWith("gateway.yaml: logging: must be a mapping of keys, not a single value"));
  EXPECT_THAT(only_error("- job\n"), StartsWith("gateway.yaml: the top level must be a mapping"));
}

TEST(ConfigErrors, WrongValueTypes) {
  EXPECT_THAT(only_error_with("  local_workers: four\n"),
              StartsWith("gateway.yaml: job.local_workers: must be a non-negative integer, got "
                         "\"four\""));
  EXPECT_THAT(only_error_with("compression:\n  collective: tree\n"),
              StartsWith("gateway.yaml: compression.collective: \"tree\" is not one of auto, "
                         "ring, allgather, aggregator"));
  EXPECT_THAT(only_error_with("logging:\n  level: verbose\n"),
              StartsWith("gateway.yaml: logging.level: \"verbose\" is not one of trace, debug, "
                         "info, warn, error"));
  EXPECT_THAT(only_error_with("logging:\n  format: xml\n"),
              StartsWith("gateway.yaml: logging.format: \"xml\" is not one of text, json"));
}

TEST(ConfigErrors, NegativeAndTooLargeNumbers) {
  EXPECT_THAT(only_error_with("  id: -7\n"),
              StartsWith("gateway.yaml: job.id: must be a non-negative integer, got \"-7\""));
  EXPECT_THAT(only_error_with("transport:\n  send_queue_bytes: -1\n"),
              StartsWith("gateway.yaml: transport.send_queue_bytes: must be a non-negative"));
  EXPECT_THAT(only_error_with("  node_rank: 4294967296\n"),
              StartsWith("gateway.yaml: job.node_rank: \"4294967296\" is out of range"));
  EXPECT_THAT(only_error_with("collective:\n  timeout_ms: 86400001\n"),
              StartsWith("gateway.yaml: collective.timeout_ms: \"86400001\" is out of range "
                         "0..86400000"));
}

TEST(ConfigErrors, MembershipRules) {
  EXPECT_THAT(only_error("job:\n  id: 3\n"), StartsWith("gateway.yaml: job.nodes: is missing"));
  EXPECT_THAT(only_error(""), StartsWith("gateway.yaml: job.nodes: is missing"));
  EXPECT_THAT(only_error("job:\n  nodes: []\n"), StartsWith("gateway.yaml: job.nodes: is missing"));
  EXPECT_THAT(
      only_error_with("  node_rank: 1\n"),
      StartsWith("gateway.yaml: job.node_rank: 1 is out of range: job.nodes has 1 entries"));
  EXPECT_THAT(only_error_with("  local_workers: 0\n"),
              StartsWith("gateway.yaml: job.local_workers: must be at least 1"));
}

TEST(ConfigErrors, LowerRanksNeedARealPort) {
  EXPECT_THAT(only_error("job:\n  nodes: [\"127.0.0.1:0\", \"127.0.0.1:0\"]\n  node_rank: 1\n"),
              StartsWith("gateway.yaml: job.nodes[0]: needs a port in 1..65535"));
  EXPECT_THAT(only_error("job:\n  nodes: [\"0.0.0.0:5000\", \"127.0.0.1:0\"]\n  node_rank: 1\n"),
              StartsWith("gateway.yaml: job.nodes[0]: 0.0.0.0 cannot be dialled"));
}

TEST(ConfigErrors, SocketPath) {
  EXPECT_THAT(only_error_with("ingress:\n  socket: \"\"\n"),
              StartsWith("gateway.yaml: ingress.socket: must not be empty"));
  EXPECT_THAT(only_error_with("ingress:\n  socket: /" + std::string(200, 's') + "\n"),
              StartsWith("gateway.yaml: ingress.socket: is 201 bytes long"));
}

TEST(ConfigErrors, ZeroTimeoutsAndSizes) {
  for (const char* key :
       {"transport.connect_timeout_ms", "transport.reconnect_min_ms", "transport.send_queue_bytes",
        "transport.max_message_bytes", "collective.timeout_ms", "streams.residual_memory_cap_bytes",
        "admin.max_connections"}) {
    const std::string path(key);
    const auto dot = path.find('.');
    const std::string yaml =
        std::string(kMinimalYaml) + path.substr(0, dot) + ":\n  " + path.substr(dot + 1) + ": 0\n";
    const auto result = parse(yaml);
    EXPECT_THAT(error_lines(result), Contains("gateway.yaml: " + path + ": must be > 0")) << key;
  }
}

TEST(ConfigErrors, AdminConnectionsAtMost65536) {
  EXPECT_THAT(only_error_with("admin:\n  max_connections: 65537\n"),
              AllOf(StartsWith("gateway.yaml: admin.max_connections:"), HasSubstr("65536")));
}

TEST(ConfigErrors, RingNeedsASummableCodec) {
  EXPECT_THAT(only_error_with("compression:\n  codec: \"topk:density=0.01\"\n  collective: ring\n"),
              StartsWith("gateway.yaml: compression.collective: ring needs a summable codec"));
  EXPECT_TRUE(
      parse(std::string(kMinimalYaml) + "compression:\n  codec: fp16\n  collective: ring\n").ok());
}

TEST(ConfigErrors, SyntaxErrorGivesLineAndColumn) {
  const std::string message = only_error("job:\n  nodes: [\"127.0.0.1:1\"\n  node_rank: 0\n");
  EXPECT_THAT(message, StartsWith("gateway.yaml: invalid YAML: "));
  EXPECT_THAT(message, HasSubstr("(line "));
  EXPECT_THAT(message, HasSubstr(", column "));
}

TEST(ConfigErrors, NestingBeyondTheYamlReadersLimitSaysSo) {
  const std::string message =
      only_error("job: " + std::string(2000, '[') + std::string(2000, ']') + "\n");
  EXPECT_THAT(message, StartsWith("gateway.yaml: invalid YAML: nested more than "));
  EXPECT_THAT(message,
              HasSubstr(" levels deep, beyond what the YAML reader takes (line 1, column "));
}

TEST(ConfigErrors, KeysAndSectionsGivenTwice) {
  EXPECT_THAT(only_error("job:\n  nodes: [\"a:1\"]\n  nodes: [\"b:1\"]\n"),
              StartsWith("gateway.yaml: job.nodes: appears twice (first on line 2)"));
  EXPECT_THAT(only_error_with("job:\n  id: 3\n"),
              StartsWith("gateway.yaml: job: appears twice (first on line 1)"));
}

TEST(ConfigErrors, OneDocumentOnly) {
  EXPECT_THAT(only_error(std::string(kMinimalYaml) + "---\njob: {}\n"),
              StartsWith("gateway.yaml: holds 2 YAML documents; a configuration is one"));
}

TEST(ConfigErrors, ReportsEveryProblemAtOnce) {
  const auto result = parse(R"(job:
  nodes: ["127.0.0.1:1", "abc"]
  local_workers: -2
compression:
  codex: fp16
  codec: tpok
transport:
  reconnect_min_ms: 100
  reconnect_max_ms: 10
logging:
  level: loud
)");
  const auto lines = error_lines(result);
  ASSERT_EQ(lines.size(), 6u) << result.status().message();
  EXPECT_THAT(lines[0], StartsWith("gateway.yaml: job.nodes[1]: \"abc\" is not host:port"));
  EXPECT_THAT(lines[1], StartsWith("gateway.yaml: job.local_workers: must be a non-negative"));
  EXPECT_THAT(lines[2], StartsWith("gateway.yaml: compression.codex: unknown key"));
  EXPECT_THAT(lines[3], StartsWith("gateway.yaml: compression.codec: "));
  EXPECT_THAT(lines[4], StartsWith("gateway.yaml: transport.reconnect_max_ms: must be >="));
  EXPECT_THAT(lines[5], StartsWith("gateway.yaml: logging.level: \"loud\""));
}

TEST(ConfigErrors, RulesOnUnreadKeysAreLeftOut) {
  // node_rank 1 is in range only with the unreadable second entry: no second, spurious problem.
  const auto result = parse("job:\n  nodes: [\"127.0.0.1:1\", \"bad\"]\n  node_rank: 1\n");
  const auto lines = error_lines(result);
  EXPECT_THAT(lines, ElementsAre(StartsWith("gateway.yaml: job.nodes[1]: ")));
  EXPECT_THAT(lines, Not(Contains(HasSubstr("job.node_rank"))));
}

TEST(ConfigErrors, NodeRankIsANumberOrAuto) {
  EXPECT_THAT(only_error("job:\n  size: 3\n  node_rank: first\ncontrol:\n  url: 127.0.0.1:9400\n"
                         "transport:\n  listen: 10.0.0.5:0\n"),
              StartsWith("gateway.yaml: job.node_rank: must be a non-negative integer, got "
                         "\"first\" (or auto: from the controller)"));
  EXPECT_THAT(only_error_with("  node_rank: auto\n"),
              StartsWith("gateway.yaml: job.node_rank: auto takes the rank from the controller: "
                         "give job.size, not job.nodes"));
  EXPECT_THAT(only_error("job:\n  size: 3\n  node_rank: auto\n  node_name: \"gpu node/1\"\n"
                         "control:\n  url: 127.0.0.1:9400\ntransport:\n  listen: 10.0.0.5:0\n"),
              StartsWith("gateway.yaml: job.node_name: \"gpu node/1\" is not a node name"));
}

TEST(ConfigErrors, AutoRankWithJobSizeIsUsable) {
  const auto config = parse(
      "job:\n  size: 3\n  node_rank: auto\ncontrol:\n  url: 127.0.0.1:9400\n"
      "transport:\n  listen: 10.0.0.5:29500\n",
      {{"GRADGATE_JOB_NODE_NAME", "gpu-node-7.cluster.local"}});
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_TRUE(config->node_rank_auto);
  EXPECT_EQ(config->node_name, "gpu-node-7.cluster.local");
}

}  // namespace
}  // namespace gradgate::gateway
