// PeerSender on its own: fragmentation, the send window, the peer's window and its probe, fast
// retransmission from SACKs, queue caps and invalid messages.
#include <gtest/gtest.h>

#include "gateway/transport/reliable/sender.h"
#include "tests/unit/transport/lossy_link.h"

namespace gradgate::gateway::reliable::testing {
namespace {

const Clock::time_point kT0 = Clock::time_point{} + std::chrono::hours(1);

Message message_of(std::size_t size) {
  auto bytes = std::make_shared<MessageBytes>(size);
  for (std::size_t i = 0; i < size; ++i) (*bytes)[i] = std::byte(i & 0xff);
  return bytes;
}

AckFields ack_with(uint64_t cumulative, uint32_t window, std::vector<SackRange> ranges = {}) {
  AckFields ack;
  ack.cumulative = cumulative;
  ack.window = window;
  for (const SackRange& range : ranges) ack.sacks[ack.sack_count++] = range;
  return ack;
}

TEST(SenderTest, MessagesAreCutIntoNumberedFragments) {
  Config config = fast_link_config();
  config.payload_bytes = 1000;
  PeerSender sender(config, 1);
  EXPECT_EQ(*sender.enqueue(message_of(2500), kT0), 0u);
  EXPECT_EQ(*sender.enqueue(message_of(1), kT0), 1u);
  const auto packets = sender.poll(kT0);
  ASSERT_EQ(packets.size(), 4u);
  const std::vector<DataFields> expected = {{0, 0, 0, 3}, {1, 0, 1, 3}, {2, 0, 2, 3}, {3, 1, 0, 1}};
  const std::vector<std::size_t> lengths = {1000, 1000, 500, 1};
  for (std::size_t i = 0; i < packets.size(); ++i) {
    EXPECT_EQ(packets[i].fields, expected[i]) << i;
    EXPECT_EQ(packets[i].length, lengths[i]) << i;
  }
  EXPECT_EQ(std::to_integer<uint8_t>(packets[1].payload()[0]), 1000 & 0xff);
  const SenderCounters counters = sender.counters();
  EXPECT_EQ(counters.packets_sent, 4u);
  EXPECT_EQ(counters.bytes_sent, 2501u);
  EXPECT_EQ(counters.in_flight, 4u);
  EXPECT_EQ(counters.queued_bytes, 2501u);
  // Acknowledging the first message frees its bytes.
  ASSERT_TRUE(sender.on_ack(ack_with(3, 1024), kT0 + milliseconds(1)).ok());
  EXPECT_EQ(sender.counters().queued_bytes, 1u);
  EXPECT_EQ(sender.counters().messages_acknowledged, 1u);
  EXPECT_EQ(sender.pending_messages(), 1u);
}

TEST(SenderTest, InFlightStaysBelowTheSmallerOfBothWindows) {
  Config config = fast_link_config();
  config.window_packets = 8;
  config.receive_window_packets = 100;
  PeerSender sender(config, 1);
  ASSERT_TRUE(sender.enqueue(message_of(100 * 1400), kT0).ok());
  EXPECT_EQ(sender.poll(kT0).size(), 8u) << "the sender's own window";
  EXPECT_TRUE(sender.poll(kT0).empty());
  // The peer has taken 2 and allows 5 past them: sequences up to 6, 4 more.
  ASSERT_TRUE(sender.on_ack(ack_with(2, 5), kT0).ok());
  EXPECT_TRUE(sender.poll(kT0).empty()) << "the right edge, 2 + 5, is below the next sequence, 8";
  ASSERT_TRUE(sender.on_ack(ack_with(8, 5), kT0).ok());
  const auto next = sender.poll(kT0);
  ASSERT_EQ(next.size(), 5u);
  EXPECT_EQ(next.front().fields.sequence, 8u);
  EXPECT_EQ(sender.counters().in_flight, 5u);
}

TEST(SenderTest, AClosedWindowIsProbedWithOnePacketAndBackoff) {
  PeerSender sender(fast_link_config(), 1);
  ASSERT_TRUE(sender.enqueue(message_of(10 * 1400), kT0).ok());
  ASSERT_EQ(sender.poll(kT0).size(), 10u);
  ASSERT_TRUE(sender.on_ack(ack_with(10, 0), kT0).ok());
  ASSERT_TRUE(sender.enqueue(message_of(5 * 1400), kT0).ok());
  const auto probe = sender.poll(kT0);
  ASSERT_EQ(probe.size(), 1u) << "nothing in flight: one packet probes the closed window";
  EXPECT_EQ(probe[0].fields.sequence, 10u);
  EXPECT_TRUE(sender.poll(kT0).empty());
  // Refused (still closed): the probe is repeated at each RTO, which doubles.
  ASSERT_TRUE(sender.on_ack(ack_with(10, 0), kT0 + microseconds(100)).ok());
  const Clock::duration rto = sender.rtt().rto();
  EXPECT_TRUE(sender.poll(kT0 + rto - microseconds(1)).empty());
  EXPECT_EQ(sender.poll(kT0 + rto).size(), 1u);
  EXPECT_EQ(sender.rtt().rto(), 2 * rto);
  // The window opens: the rest goes.
  ASSERT_TRUE(sender.on_ack(ack_with(11, 100), kT0 + rto + microseconds(100)).ok());
  EXPECT_EQ(sender.poll(kT0 + rto + microseconds(100)).size(), 4u);
}

TEST(SenderTest, ThreeSackedPacketsAboveAHoleRetransmitItAtOnce) {
  PeerSender sender(fast_link_config(), 1);
  ASSERT_TRUE(sender.enqueue(message_of(6 * 1400), kT0).ok());
  ASSERT_EQ(sender.poll(kT0).size(), 6u);
  // Sequence 0 is missing; 1 and 2 arrived: not yet a loss (maybe reordering).
  ASSERT_TRUE(sender.on_ack(ack_with(0, 1024, {{1, 3}}), kT0 + microseconds(100)).ok());
  EXPECT_TRUE(sender.poll(kT0 + microseconds(100)).empty());
  EXPECT_EQ(sender.counters().in_flight, 4u);
  // A third packet passed it: sequence 0 goes again, long before its RTO.
  ASSERT_TRUE(sender.on_ack(ack_with(0, 1024, {{1, 3}, {4, 5}}), kT0 + microseconds(150)).ok());
  EXPECT_EQ(sender.next_timer(), Clock::time_point::min());
  const auto fast = sender.poll(kT0 + microseconds(150));
  ASSERT_EQ(fast.size(), 1u);
  EXPECT_EQ(fast[0].fields.sequence, 0u);
  EXPECT_EQ(sender.counters().retransmits_fast, 1u);
  EXPECT_EQ(sender.counters().retransmits_timeout, 0u);
  // Only once: more SACKs do not repeat it; sequence 3 has only one SACKed packet above it.
  ASSERT_TRUE(sender.on_ack(ack_with(0, 1024, {{1, 3}, {4, 6}}), kT0 + microseconds(160)).ok());
  EXPECT_TRUE(sender.poll(kT0 + microseconds(160)).empty());
  ASSERT_TRUE(sender.on_ack(ack_with(6, 1024), kT0 + microseconds(300)).ok());
  EXPECT_EQ(sender.counters().in_flight, 0u);
  EXPECT_FALSE(sender.outstanding_since().has_value());
}

TEST(SenderTest, AcksOfUnsentSequencesAreRefusedAndOldAcksIgnored) {
  PeerSender sender(fast_link_config(), 1);
  ASSERT_TRUE(sender.enqueue(message_of(3 * 1400), kT0).ok());
  ASSERT_EQ(sender.poll(kT0).size(), 3u);
  EXPECT_EQ(sender.on_ack(ack_with(4, 1024), kT0).code(), ErrorCode::kMalformedFrame);
  EXPECT_EQ(sender.on_ack(ack_with(0, 1024, {{2, 5}}), kT0).code(), ErrorCode::kMalformedFrame);
  EXPECT_EQ(sender.counters().in_flight, 3u);
  EXPECT_EQ(sender.counters().acks_received, 0u);
  ASSERT_TRUE(sender.on_ack(ack_with(2, 1024), kT0).ok());
  ASSERT_TRUE(sender.on_ack(ack_with(1, 0), kT0).ok());  // overtaken by the one before
  EXPECT_EQ(sender.peer_window(), 1024u);
  EXPECT_EQ(sender.counters().in_flight, 1u);
}

TEST(SenderTest, QueueCapAndMessageSizesAreEnforcedAtEnqueue) {
  Config config = fast_link_config();
  config.max_message_bytes = 1000;
  config.max_queued_bytes = 2500;
  PeerSender sender(config, 1);
  EXPECT_EQ(sender.enqueue(message_of(0), kT0).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(sender.enqueue(nullptr, kT0).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(sender.enqueue(message_of(1001), kT0).status().code(), ErrorCode::kInvalidArgument);
  ASSERT_TRUE(sender.enqueue(message_of(1000), kT0).ok());
  ASSERT_TRUE(sender.enqueue(message_of(1000), kT0).ok());
  const Status full = sender.enqueue(message_of(501), kT0).status();
  EXPECT_EQ(full.code(), ErrorCode::kResourceExhausted);
  EXPECT_NE(full.message().find("rank 1"), std::string::npos) << full.message();
  EXPECT_TRUE(sender.enqueue(message_of(500), kT0).ok());
  // Acknowledged bytes make room again.
  ASSERT_EQ(sender.poll(kT0).size(), 3u);
  ASSERT_TRUE(sender.on_ack(ack_with(1, 1024), kT0).ok());
  EXPECT_TRUE(sender.enqueue(message_of(1000), kT0).ok());
}

}  // namespace
}  // namespace gradgate::gateway::reliable::testing
