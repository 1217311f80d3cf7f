// A peer's messages that pass this gateway's mailbox cap (transport.send_queue_bytes x (nodes -
// 1)) fail the step they belong to, on every gateway at once and naming the setting to raise, and
// nothing else: the connection stays.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "two_gateways.h"

namespace gradgate::gateway {
namespace {

using testing::kElements;
using testing::TwoGateways;

TEST(MailboxCap, AStepWhoseMessagesPassTheCapFailsAtOnceAndTheLinkStays) {
  // 50000 fp32 elements: each gateway's ring part is 100 KB, more than a 64 KiB mailbox.
  TwoGateways job("none", 1, 1, [](GatewayConfig& config) { config.send_queue_bytes = 64 << 10; });
  const std::array<std::vector<float>, 2> inputs{std::vector<float>(kElements, 1.0f),
                                                 std::vector<float>(kElements, 2.0f)};
  for (int step = 0; step < 3; ++step) {
    const auto start = std::chrono::steady_clock::now();
    const auto outcomes = job.step(inputs);
    // Not at the 5 s timeout, nor for a lost connection.
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
    for (const auto& outcome : outcomes) {
      EXPECT_FALSE(outcome.status.ok());
      EXPECT_NE(outcome.status.message().find("raise transport.send_queue_bytes"),
                std::string::npos)
          << outcome.status.to_string();
    }
  }
  for (uint32_t rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(job.transport(rank).stats().rejected, 0u) << "gateway " << rank;
    EXPECT_EQ(job.transport(rank).stats().disconnects, 0u) << "gateway " << rank;
  }
}

// The message comes before this gateway starts the step: the step fails as it starts, and the
// peer hears of it (this gateway's own refusal is news to it).
TEST(MailboxCap, AMessageRefusedBeforeTheStepStartsFailsItOnBothGateways) {
  TwoGateways job("none", 1, 1, [](GatewayConfig& config) { config.send_queue_bytes = 64 << 10; });
  const uint64_t refused = job.gateway(0).mailbox_stats().refused;
  testing::Outcome late;
  testing::Outcome early;
  const auto start = std::chrono::steady_clock::now();
  job.gateway(1).on_allreduce(0, job.key(1), early.callback());
  // Gateway 1's part reaches gateway 0, which has not started the step, and is refused.
  while (job.gateway(0).mailbox_stats().refused == refused &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(20)) {
    std::this_thread::yield();
  }
  ASSERT_GT(job.gateway(0).mailbox_stats().refused, refused);
  job.gateway(0).on_allreduce(0, job.key(0), late.callback());
  for (testing::Outcome* outcome : {&late, &early}) {
    const auto done = outcome->wait(std::chrono::seconds(20));
    ASSERT_TRUE(done.has_value());
    EXPECT_NE(done->status.message().find("raise transport.send_queue_bytes"), std::string::npos)
        << done->status.to_string();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));  // not at 5 s
}

}  // namespace
}  // namespace gradgate::gateway
