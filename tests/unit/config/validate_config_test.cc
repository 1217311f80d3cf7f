// validate_gateway_config on structs built in code: the rules without any file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gateway/config/gateway_config.h"

namespace gradgate::gateway {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::StartsWith;

GatewayConfig usable_config() {
  GatewayConfig config;
  config.nodes = {{"127.0.0.1", 29500}, {"127.0.0.1", 0}, {"127.0.0.1", 0}};
  config.node_rank = 1;
  config.listen = {"0.0.0.0", 0};
  return config;
}

TEST(ValidateConfig, UsableConfigHasNoProblems) {
  EXPECT_THAT(validate_gateway_config(usable_config()), IsEmpty());
}

TEST(ValidateConfig, PortZeroIsAllowedFromTheOwnRankUp) {
  auto config = usable_config();
  config.node_rank = 0;
  config.nodes[0].port = 0;
  EXPECT_THAT(validate_gateway_config(config), IsEmpty());
  config.node_rank = 2;
  EXPECT_THAT(validate_gateway_config(config),
              ElementsAre(StartsWith("job.nodes[0]: needs a port in 1..65535"),
                          StartsWith("job.nodes[1]: needs a port in 1..65535")));
}

TEST(ValidateConfig, DefaultStructLacksNodes) {
  const GatewayConfig defaults;
  EXPECT_THAT(validate_gateway_config(defaults), ElementsAre(StartsWith("job.nodes: is missing")));
}

TEST(ValidateConfig, ListenMustBeResolved) {
  auto config = usable_config();
  config.listen = {};
  EXPECT_THAT(validate_gateway_config(config),
              ElementsAre(StartsWith("transport.listen: is not set")));
}

TEST(ValidateConfig, EmptyHostInANode) {
  auto config = usable_config();
  config.nodes[2].host.clear();
  EXPECT_THAT(validate_gateway_config(config), ElementsAre("job.nodes[2]: the host is empty"));
}

TEST(ValidateConfig, ListsEveryProblem) {
  auto config = usable_config();
  config.local_workers = 0;
  config.socket_path.clear();
  config.codec = "sign";
  config.collective = CollectiveMode::kRing;
  config.connect_timeout = std::chrono::milliseconds(0);
  config.reconnect_min = std::chrono::milliseconds(-1);
  config.timeout = std::chrono::milliseconds(0);
  config.log_format = "yaml";
  EXPECT_THAT(
      validate_gateway_config(config),
      ElementsAre("job.local_workers: must be at least 1", "ingress.socket: must not be empty",
                  StartsWith("compression.collective: ring needs a summable codec, and "
                             "\"sign\" is not"),
                  "transport.connect_timeout_ms: must be > 0",
                  "transport.reconnect_min_ms: must be > 0", "collective.timeout_ms: must be > 0",
                  "logging.format: \"yaml\" is not one of text, json"));
}

// Ring sums a frame of every gateway; qsgd's sum holds `workers` of them.
TEST(ValidateConfig, RingNeedsAQsgdSumThatHoldsEveryGateway) {
  auto config = usable_config();
  config.collective = CollectiveMode::kRing;
  config.codec = "qsgd:bits=4,workers=" + std::to_string(config.nodes.size() - 1);
  EXPECT_THAT(validate_gateway_config(config),
              ElementsAre(StartsWith("compression.collective: ring sums a frame of each of the "
                                     "job's " +
                                     std::to_string(config.nodes.size()) + " gateways")));
  config.codec = "qsgd:bits=4,workers=" + std::to_string(config.nodes.size());
  EXPECT_THAT(validate_gateway_config(config), IsEmpty());
  config.collective = CollectiveMode::kAuto;  // decodes the frames one by one
  config.codec = "qsgd:bits=4,workers=" + std::to_string(config.nodes.size() - 1);
  EXPECT_THAT(validate_gateway_config(config), IsEmpty());
}

TEST(ValidateConfig, JobSizeTakesTheAddressesFromTheController) {
  GatewayConfig config;
  config.size = 3;
  config.node_rank = 2;
  config.controller = {"127.0.0.1", 9400};
  config.listen = {"10.0.0.5", 0};
  EXPECT_THAT(validate_gateway_config(config), IsEmpty());
  config.node_rank = 3;
  config.controller = {};
  config.listen = {"0.0.0.0", 0};
  EXPECT_THAT(validate_gateway_config(config),
              ElementsAre(StartsWith("job.node_rank: 3 is out of range: job.size is 3"),
                          StartsWith("job.size: takes the gateways' addresses from the controller"),
                          StartsWith("transport.listen: with job.size")));
  config = usable_config();
  config.size = 3;
  EXPECT_THAT(validate_gateway_config(config),
              ElementsAre(StartsWith("job.size: give job.nodes or job.size, not both")));
}

// The controller hands out ranks below 65536 and refuses reports of larger jobs.
TEST(ValidateConfig, AJobHasAtMost65536Gateways) {
  auto config = usable_config();
  config.nodes.resize(65536, {"127.0.0.1", 0});
  EXPECT_THAT(validate_gateway_config(config), IsEmpty());
  config.nodes.push_back({"127.0.0.1", 0});
  EXPECT_THAT(validate_gateway_config(config),
              ElementsAre("job.nodes: has 65537 entries; a job has at most 65536 gateways"));
}

TEST(ValidateConfig, SegmentsAreNeverCutOrAtLeast64KiB) {
  auto config = usable_config();
  config.segment_bytes = 0;
  EXPECT_THAT(validate_gateway_config(config), IsEmpty());
  config.segment_bytes = 65536;
  EXPECT_THAT(validate_gateway_config(config), IsEmpty());
  config.segment_bytes = 4096;
  EXPECT_THAT(validate_gateway_config(config),
              ElementsAre("collective.segment_bytes: must be 0 (never cut) or at least 65536 "
                          "bytes, got 4096"));
}

// Every segment is one message: the message limit and the send queue must hold it.
TEST(ValidateConfig, MessagesAndSendQueuesHoldASegment) {
  auto config = usable_config();
  config.segment_bytes = 1 << 20;
  config.max_message_bytes = (1 << 20) + 256;
  config.send_queue_bytes = (1 << 20) + 256;
  EXPECT_THAT(validate_gateway_config(config), IsEmpty());
  config.max_message_bytes = 1 << 20;
  config.send_queue_bytes = 1 << 19;
  EXPECT_THAT(validate_gateway_config(config),
              ElementsAre("transport.max_message_bytes: must hold a segment's message: at least "
                          "collective.segment_bytes + 256 = 1048832, got 1048576",
                          "transport.send_queue_bytes: must hold a segment's message: at least "
                          "collective.segment_bytes + 256 = 1048832, got 524288"));
  config.segment_bytes = ~uint64_t{0};  // + 256 would wrap
  EXPECT_THAT(validate_gateway_config(config),
              ElementsAre("collective.segment_bytes: must be at most 2147483391: a segment travels "
                          "as one message (at most 2^31 - 1 bytes)"));
  config.segment_bytes = 0;  // whole tensors: their sizes are not known here
  EXPECT_THAT(validate_gateway_config(config), IsEmpty());
  config.send_queue_bytes = (uint64_t{1} << 40) + 1;  // x (nodes - 1) would overflow at scale
  EXPECT_THAT(validate_gateway_config(config),
              ElementsAre("transport.send_queue_bytes: must be <= 1099511627776 (1 TiB), got "
                          "1099511627777"));
}

// 0 would poll the controller thousands of times a second; it refuses waits above 60 s.
TEST(ValidateConfig, PolicyPollsWaitOneMillisecondToOneMinute) {
  auto config = usable_config();
  for (const int64_t ms : {int64_t{1}, int64_t{60000}}) {
    config.control_poll_wait = std::chrono::milliseconds(ms);
    EXPECT_THAT(validate_gateway_config(config), IsEmpty()) << ms;
  }
  config.control_poll_wait = std::chrono::milliseconds(0);
  EXPECT_THAT(validate_gateway_config(config),
              ElementsAre("control.poll_wait_ms: must be in 1..60000, got 0"));
  config.control_poll_wait = std::chrono::milliseconds(60001);
  EXPECT_THAT(validate_gateway_config(config),
              ElementsAre("control.poll_wait_ms: must be in 1..60000, got 60001"));
}

// A request to the controller bounded below a busy controller's answer on a healthy network fails
// them all; one of hours would leave a silent controller unnoticed.
TEST(ValidateConfig, ControllerRequestsTimeOutAfter100MsToTenMinutes) {
  auto config = usable_config();
  for (const int64_t ms : {int64_t{100}, int64_t{600000}}) {
    config.control_request_timeout = std::chrono::milliseconds(ms);
    EXPECT_THAT(validate_gateway_config(config), IsEmpty()) << ms;
  }
  config.control_request_timeout = std::chrono::milliseconds(99);
  EXPECT_THAT(validate_gateway_config(config),
              ElementsAre("control.request_timeout_ms: must be in 100..600000, got 99"));
  config.control_request_timeout = std::chrono::milliseconds(600001);
  EXPECT_THAT(validate_gateway_config(config),
              ElementsAre("control.request_timeout_ms: must be in 100..600000, got 600001"));
}

}  // namespace
}  // namespace gradgate::gateway
