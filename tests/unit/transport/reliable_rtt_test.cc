// Retransmission timeouts: the RFC 6298 estimator on its own, and the sender taking its samples
// by Karn's rule (never from a packet sent more than once).
#include <gtest/gtest.h>

#include "gateway/transport/reliable/rtt_estimator.h"
#include "gateway/transport/reliable/sender.h"
#include "tests/unit/transport/lossy_link.h"

namespace gradgate::gateway::reliable::testing {
namespace {

Config rto_config() {
  Config config = fast_link_config();
  config.initial_rto = milliseconds(100);
  config.min_rto = milliseconds(1);
  config.max_rto = milliseconds(1000);
  return config;
}

Message message_of(std::size_t size) { return std::make_shared<MessageBytes>(size, std::byte{1}); }

AckFields cumulative_ack(uint64_t cumulative, uint32_t window = 1024) {
  AckFields ack;
  ack.cumulative = cumulative;
  ack.window = window;
  return ack;
}

TEST(RttEstimatorTest, FollowsSamplesAsRfc6298Says) {
  RttEstimator rtt(rto_config());
  EXPECT_EQ(rtt.rto(), milliseconds(100)) << "the initial RTO before any sample";
  EXPECT_FALSE(rtt.smoothed().has_value());

  rtt.add_sample(milliseconds(100));  // SRTT 100, RTTVAR 50: RTO 100 + 4 * 50
  EXPECT_EQ(rtt.smoothed(), milliseconds(100));
  EXPECT_EQ(rtt.variation(), milliseconds(50));
  EXPECT_EQ(rtt.rto(), milliseconds(300));

  rtt.add_sample(milliseconds(200));  // RTTVAR 3/4 50 + 1/4 100, SRTT 7/8 100 + 1/8 200
  EXPECT_EQ(rtt.variation(), microseconds(62'500));
  EXPECT_EQ(rtt.smoothed(), microseconds(112'500));
  EXPECT_EQ(rtt.rto(), microseconds(362'500));
  EXPECT_EQ(rtt.samples(), 2u);

  for (int i = 0; i < 100; ++i) rtt.add_sample(microseconds(10));
  EXPECT_EQ(rtt.rto(), milliseconds(1)) << "steady tiny samples: clamped to min_rto";
  EXPECT_LT(*rtt.smoothed(), microseconds(20));
}

TEST(RttEstimatorTest, BackOffDoublesUpToTheMaximumAndTheNextSampleUndoesIt) {
  RttEstimator rtt(rto_config());
  rtt.add_sample(milliseconds(100));
  rtt.back_off();
  EXPECT_EQ(rtt.rto(), milliseconds(600));
  rtt.back_off();
  EXPECT_EQ(rtt.rto(), milliseconds(1000)) << "clamped to max_rto";
  rtt.add_sample(milliseconds(100));  // SRTT 100, RTTVAR 3/4 50: 100 + 150
  EXPECT_EQ(rtt.rto(), milliseconds(250));
  rtt.add_sample(milliseconds(5000));
  EXPECT_EQ(rtt.rto(), milliseconds(1000)) << "a huge sample is clamped too";
}

TEST(SenderRttTest, KarnsRuleTakesNoSampleFromARetransmittedPacket) {
  PeerSender sender(rto_config(), 1);
  const Clock::time_point t0 = Clock::time_point{} + std::chrono::hours(1);
  ASSERT_TRUE(sender.enqueue(message_of(100), t0).ok());
  ASSERT_EQ(sender.poll(t0).size(), 1u);
  EXPECT_EQ(sender.next_timer(), t0 + milliseconds(100));
  EXPECT_TRUE(sender.poll(t0 + milliseconds(99)).empty());

  // The first copy is presumed lost: it goes again and the RTO doubles.
  const auto again = sender.poll(t0 + milliseconds(100));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].fields.sequence, 0u);
  EXPECT_EQ(sender.counters().retransmits_timeout, 1u);
  EXPECT_EQ(sender.rtt().rto(), milliseconds(200));

  // The ACK may answer either copy: no sample, and the backed-off RTO stays.
  ASSERT_TRUE(sender.on_ack(cumulative_ack(1), t0 + milliseconds(130)).ok());
  EXPECT_EQ(sender.rtt().samples(), 0u);
  EXPECT_EQ(sender.rtt().rto(), milliseconds(200));
  EXPECT_EQ(sender.counters().in_flight, 0u);

  // A packet sent once gives a sample: 40 ms, RTO 40 + 4 * 20.
  const Clock::time_point t1 = t0 + milliseconds(200);
  ASSERT_TRUE(sender.enqueue(message_of(100), t1).ok());
  ASSERT_EQ(sender.poll(t1).size(), 1u);
  ASSERT_TRUE(sender.on_ack(cumulative_ack(2), t1 + milliseconds(40)).ok());
  EXPECT_EQ(sender.rtt().samples(), 1u);
  EXPECT_EQ(sender.rtt().smoothed(), milliseconds(40));
  EXPECT_EQ(sender.rtt().rto(), milliseconds(120));
}

TEST(SenderRttTest, ACumulativeAckSamplesTheNewestPacketSentOnce) {
  PeerSender sender(rto_config(), 1);
  const Clock::time_point t0 = Clock::time_point{} + std::chrono::hours(1);
  ASSERT_TRUE(sender.enqueue(message_of(100), t0).ok());
  ASSERT_EQ(sender.poll(t0).size(), 1u);
  ASSERT_TRUE(sender.enqueue(message_of(100), t0 + milliseconds(10)).ok());
  ASSERT_EQ(sender.poll(t0 + milliseconds(10)).size(), 1u);
  // One (delayed) ACK for both: the sample is 20 ms, from the second packet.
  ASSERT_TRUE(sender.on_ack(cumulative_ack(2), t0 + milliseconds(30)).ok());
  EXPECT_EQ(sender.rtt().samples(), 1u);
  EXPECT_EQ(sender.rtt().smoothed(), milliseconds(20));
}

}  // namespace
}  // namespace gradgate::gateway::reliable::testing
