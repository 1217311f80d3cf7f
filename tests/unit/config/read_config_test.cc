// Reading valid files: defaults for absent keys, every key read, and the shipped example.
#include <fstream>
#include <sstream>

#include "config_test_support.h"
#include "gateway/config/gateway_config.h"

namespace gradgate::gateway {
namespace {

using testing::kMinimalYaml;
using testing::parse;

TEST(ReadConfig, AbsentKeysKeepTheStructDefaults) {
  const auto config = parse(kMinimalYaml);
  ASSERT_TRUE(config.ok()) << config.status().message();
  const GatewayConfig defaults;
  EXPECT_EQ(config->job_id, defaults.job_id);
  EXPECT_EQ(config->nodes, (std::vector<net::Endpoint>{{"127.0.0.1", 29500}}));
  EXPECT_EQ(config->node_rank, 0u);
  EXPECT_EQ(config->local_workers, defaults.local_workers);
  EXPECT_EQ(config->socket_path, defaults.socket_path);
  EXPECT_EQ(config->codec, defaults.codec);
  EXPECT_EQ(config->collective, defaults.collective);
  EXPECT_EQ(config->min_compress_elements, defaults.min_compress_elements);
  EXPECT_EQ(config->connect_timeout, defaults.connect_timeout);
  EXPECT_EQ(config->reconnect_min, defaults.reconnect_min);
  EXPECT_EQ(config->reconnect_max, defaults.reconnect_max);
  EXPECT_EQ(config->send_queue_bytes, defaults.send_queue_bytes);
  EXPECT_EQ(config->max_message_bytes, defaults.max_message_bytes);
  EXPECT_EQ(config->timeout, defaults.timeout);
  EXPECT_EQ(config->residual_memory_cap_bytes, defaults.residual_memory_cap_bytes);
  EXPECT_EQ(config->control_request_timeout, defaults.control_request_timeout);
  EXPECT_EQ(config->log_level, defaults.log_level);
  EXPECT_EQ(config->log_format, defaults.log_format);
}

TEST(ReadConfig, ListenDefaultsToThisRanksNode) {
  const auto config =
      parse("job:\n  nodes: [\"127.0.0.1:29500\", \"0.0.0.0:0\"]\n  node_rank: 1\n");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->listen, (net::Endpoint{"0.0.0.0", 0}));
}

TEST(ReadConfig, ReadsEveryKey) {
  const auto config = parse(R"(
job:
  id: 42
  nodes:
    - 10.0.0.1:1000
    - "10.0.0.2:1001"
    - node-c:0
  node_rank: 2
  local_workers: 8
ingress:
  socket: /run/gg.sock
compression:
  codec: "qsgd:bits=4,workers=8"
  collective: ring
  min_compress_elements: 0
transport:
  listen: 0.0.0.0:4000
  connect_timeout_ms: 111
  reconnect_min_ms: 5
  reconnect_max_ms: 500
  send_queue_bytes: 1000
  max_message_bytes: 2000
collective:
  timeout_ms: 777
  segment_bytes: 0
streams:
  residual_memory_cap_bytes: 3000
admin:
  max_connections: 7
control:
  report_interval_ms: 250
  poll_wait_ms: 3000
  request_timeout_ms: 20000
logging:
  level: debug
  format: json
)");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->job_id, 42u);
  EXPECT_EQ(config->nodes,
            (std::vector<net::Endpoint>{{"10.0.0.1", 1000}, {"10.0.0.2", 1001}, {"node-c", 0}}));
  EXPECT_EQ(config->node_rank, 2u);
  EXPECT_EQ(config->local_workers, 8u);
  EXPECT_EQ(config->socket_path, "/run/gg.sock");
  EXPECT_EQ(config->codec, "qsgd:bits=4,workers=8");
  EXPECT_EQ(config->collective, CollectiveMode::kRing);
  EXPECT_EQ(config->min_compress_elements, 0u);
  EXPECT_EQ(config->listen, (net::Endpoint{"0.0.0.0", 4000}));
  EXPECT_EQ(config->connect_timeout, std::chrono::milliseconds(111));
  EXPECT_EQ(config->reconnect_min, std::chrono::milliseconds(5));
  EXPECT_EQ(config->reconnect_max, std::chrono::milliseconds(500));
  EXPECT_EQ(config->send_queue_bytes, 1000u);
  EXPECT_EQ(config->max_message_bytes, 2000u);
  EXPECT_EQ(config->timeout, std::chrono::milliseconds(777));
  EXPECT_EQ(config->residual_memory_cap_bytes, 3000u);
  EXPECT_EQ(config->admin_max_connections, 7u);
  EXPECT_EQ(config->control_report_interval, std::chrono::milliseconds(250));
  EXPECT_EQ(config->control_poll_wait, std::chrono::milliseconds(3000));
  EXPECT_EQ(config->control_request_timeout, std::chrono::milliseconds(20000));
  EXPECT_EQ(config->log_level, "debug");
  EXPECT_EQ(config->log_format, "json");
}

TEST(ReadConfig, ReadsLargestUnsignedValues) {
  const auto config = parse(std::string(kMinimalYaml) +
                            "  id: 18446744073709551615\n  local_workers: 4294967295\n");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->job_id, UINT64_MAX);
  EXPECT_EQ(config->local_workers, UINT32_MAX);
}

TEST(ReadConfig, EmptySectionsAreAllowed) {
  const auto config = parse(std::string(kMinimalYaml) + "logging:\ningress: {}\n");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->log_level, "info");
}

std::string example_yaml() {
  const std::string path = std::string(GRADGATE_SOURCE_DIR) + "/config/gateway.yaml";
  std::ifstream file(path);
  EXPECT_TRUE(file) << path;
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

TEST(ReadConfig, ShippedExampleParsesAndValidatesClean) {
  const auto config = parse(example_yaml());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_TRUE(validate_gateway_config(*config).empty());
  EXPECT_EQ(config->nodes,
            (std::vector<net::Endpoint>{{"127.0.0.1", 29500}, {"127.0.0.1", 29501}}));
  EXPECT_EQ(config->node_rank, 0u);
  EXPECT_EQ(config->socket_path, "/tmp/gradgate-0.sock");
  EXPECT_EQ(config->listen, (net::Endpoint{"127.0.0.1", 29500}));
}

TEST(ReadConfig, ShippedExampleServesRankOneWithTheDocumentedOverrides) {
  const auto config = parse(example_yaml(), {},
                            {"job.node_rank=1", "transport.listen=127.0.0.1:29501",
                             "ingress.socket=/tmp/gradgate-1.sock"});
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->node_rank, 1u);
  EXPECT_EQ(config->listen, (net::Endpoint{"127.0.0.1", 29501}));
}

}  // namespace
}  // namespace gradgate::gateway
