// PeerReceiver on its own: when it acknowledges and what, duplicates and the window's right
// edge, reassembly into one buffer, and fragments that break the stream.
#include <gtest/gtest.h>

#include "gateway/transport/reliable/receiver.h"
#include "tests/unit/transport/lossy_link.h"

namespace gradgate::gateway::reliable::testing {
namespace {

const Clock::time_point kT0 = Clock::time_point{} + std::chrono::hours(1);

std::vector<std::byte> bytes_of(std::size_t size, uint8_t fill) {
  return std::vector<std::byte>(size, std::byte{fill});
}

Config small_config() {
  Config config = fast_link_config();
  config.ack_every_packets = 4;
  config.receive_window_packets = 16;
  return config;
}

TEST(ReceiverTest, InOrderPacketsAreAcknowledgedEveryNOrAfterTheDelay) {
  PeerReceiver receiver(small_config(), 1);
  for (uint64_t sequence = 0; sequence < 3; ++sequence) {
    ASSERT_TRUE(receiver.on_data({sequence, sequence, 0, 1}, bytes_of(10, 1), kT0).ok());
  }
  EXPECT_FALSE(receiver.ack_due(kT0));
  EXPECT_EQ(receiver.next_ack_time(), kT0 + microseconds(50));
  EXPECT_FALSE(receiver.take_ack(kT0).has_value());
  ASSERT_TRUE(receiver.on_data({3, 3, 0, 1}, bytes_of(10, 1), kT0).ok());
  EXPECT_TRUE(receiver.ack_due(kT0)) << "the 4th packet";
  const auto ack = receiver.take_ack(kT0);
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->cumulative, 4u);
  EXPECT_EQ(ack->sack_count, 0u);
  EXPECT_EQ(ack->window, 12u) << "four messages delivered and not taken";
  EXPECT_FALSE(receiver.next_ack_time().has_value());

  ASSERT_TRUE(receiver.on_data({4, 4, 0, 1}, bytes_of(10, 1), kT0 + milliseconds(1)).ok());
  EXPECT_FALSE(receiver.ack_due(kT0 + milliseconds(1) + microseconds(49)));
  EXPECT_TRUE(receiver.ack_due(kT0 + milliseconds(1) + microseconds(50)));
  EXPECT_EQ(receiver.counters().acks_sent, 1u);
}

TEST(ReceiverTest, GapsAreAcknowledgedAtOnceWithSackRanges) {
  PeerReceiver receiver(small_config(), 1);
  ASSERT_TRUE(receiver.on_data({0, 0, 0, 1}, bytes_of(5, 1), kT0).ok());
  EXPECT_FALSE(receiver.ack_due(kT0));
  for (uint64_t sequence : {2, 3, 5, 7, 8}) {
    ASSERT_TRUE(receiver.on_data({sequence, sequence, 0, 1}, bytes_of(5, 1), kT0).ok());
  }
  EXPECT_TRUE(receiver.ack_due(kT0));
  const auto ack = receiver.take_ack(kT0);
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->cumulative, 1u);
  ASSERT_EQ(ack->sack_count, 3u);
  EXPECT_EQ(ack->sacks[0], (SackRange{2, 4}));
  EXPECT_EQ(ack->sacks[1], (SackRange{5, 6}));
  EXPECT_EQ(ack->sacks[2], (SackRange{7, 9}));
  EXPECT_EQ(receiver.counters().out_of_order, 5u);
  EXPECT_EQ(receiver.ready_messages(), 1u);
  // Filling the first gap delivers up to the next one, and is acknowledged at once.
  ASSERT_TRUE(receiver.on_data({1, 1, 0, 1}, bytes_of(5, 1), kT0).ok());
  EXPECT_EQ(receiver.cumulative(), 4u);
  EXPECT_EQ(receiver.ready_messages(), 4u);
  EXPECT_TRUE(receiver.ack_due(kT0));
}

TEST(ReceiverTest, TheLowestSackRangesAreReportedWhenThereAreTooMany) {
  Config config = small_config();
  config.receive_window_packets = 100;
  PeerReceiver receiver(config, 1);
  for (uint64_t sequence = 2; sequence < 60; sequence += 2) {
    ASSERT_TRUE(receiver.on_data({sequence, sequence, 0, 1}, bytes_of(5, 1), kT0).ok());
  }
  const auto ack = receiver.take_ack(kT0);
  ASSERT_TRUE(ack.has_value());
  ASSERT_EQ(ack->sack_count, kMaxSackRanges);
  EXPECT_EQ(ack->sacks[0], (SackRange{2, 3}));
  EXPECT_EQ(ack->sacks[kMaxSackRanges - 1], (SackRange{32, 33}));
}

TEST(ReceiverTest, DuplicatesAndPacketsPastTheWindowAreDroppedButAcknowledged) {
  PeerReceiver receiver(small_config(), 1);
  ASSERT_TRUE(receiver.on_data({0, 0, 0, 1}, bytes_of(5, 1), kT0).ok());
  ASSERT_TRUE(receiver.on_data({2, 2, 0, 1}, bytes_of(5, 1), kT0).ok());
  ASSERT_TRUE(receiver.take_ack(kT0).has_value());
  ASSERT_TRUE(receiver.on_data({0, 0, 0, 1}, bytes_of(5, 9), kT0).ok());  // below the ack
  EXPECT_TRUE(receiver.ack_due(kT0));
  ASSERT_TRUE(receiver.take_ack(kT0).has_value());
  ASSERT_TRUE(receiver.on_data({2, 2, 0, 1}, bytes_of(5, 9), kT0).ok());  // already held
  ASSERT_TRUE(receiver.take_ack(kT0).has_value());
  // The window is 16 and one message is ready (not taken): the right edge is 1 + 16 - 1.
  EXPECT_EQ(receiver.window(), 15u);
  ASSERT_TRUE(receiver.on_data({16, 16, 0, 1}, bytes_of(5, 1), kT0).ok());
  EXPECT_TRUE(receiver.ack_due(kT0));
  EXPECT_EQ(receiver.counters().duplicates, 2u);
  EXPECT_EQ(receiver.counters().beyond_window, 1u);
  EXPECT_EQ(receiver.counters().packets_received, 5u);
  EXPECT_EQ(receiver.ready_messages(), 1u);
  ASSERT_TRUE(receiver.on_data({1, 1, 0, 1}, bytes_of(5, 1), kT0).ok());
  ASSERT_EQ(receiver.ready_messages(), 3u);
  for (uint64_t id = 0; id < 3; ++id) {
    const auto message = receiver.take_message();
    ASSERT_TRUE(message.has_value());
    EXPECT_EQ(message->id, id);
    EXPECT_EQ(message->bytes[0], std::byte{1}) << "the first copy is kept, not the duplicate";
  }
}

TEST(ReceiverTest, TakingMessagesOpensAClosedWindowWithAnAckAtOnce) {
  PeerReceiver receiver(small_config(), 1);
  for (uint64_t sequence = 0; sequence < 16; ++sequence) {
    ASSERT_TRUE(receiver.on_data({sequence, sequence, 0, 1}, bytes_of(5, 1), kT0).ok());
  }
  const auto closed = receiver.take_ack(kT0);
  ASSERT_TRUE(closed.has_value());
  EXPECT_EQ(closed->window, 0u);
  ASSERT_TRUE(receiver.take_message().has_value());
  EXPECT_TRUE(receiver.ack_due(kT0)) << "the peer must learn that the window opened";
  const auto open = receiver.take_ack(kT0);
  ASSERT_TRUE(open.has_value());
  EXPECT_EQ(open->window, 1u);
  EXPECT_EQ(open->cumulative, 16u);
}

TEST(ReceiverTest, FragmentsAreReassembledInOrderIntoOneBuffer) {
  PeerReceiver receiver(small_config(), 1);
  ASSERT_TRUE(receiver.on_data({2, 0, 2, 3}, bytes_of(3, 3), kT0).ok());
  ASSERT_TRUE(receiver.on_data({0, 0, 0, 3}, bytes_of(8, 1), kT0).ok());
  EXPECT_FALSE(receiver.take_message().has_value()) << "fragment 1 is missing";
  ASSERT_TRUE(receiver.on_data({1, 0, 1, 3}, bytes_of(8, 2), kT0).ok());
  auto message = receiver.take_message();
  ASSERT_TRUE(message.has_value());
  EXPECT_EQ(message->id, 0u);
  ASSERT_EQ(message->bytes.size(), 19u);
  EXPECT_EQ(message->bytes[7], std::byte{1});
  EXPECT_EQ(message->bytes[8], std::byte{2});
  EXPECT_EQ(message->bytes[18], std::byte{3});
  EXPECT_EQ(receiver.counters().messages_delivered, 1u);
  EXPECT_EQ(receiver.counters().bytes_delivered, 19u);
  EXPECT_FALSE(receiver.take_message().has_value());
}

TEST(ReceiverTest, FragmentsThatBreakTheStreamAreAStickyProtocolError) {
  struct Case {
    const char* what;
    std::vector<DataFields> fields;
    std::vector<std::size_t> sizes;
  };
  const std::vector<Case> cases = {
      {"message id skipped", {{0, 1, 0, 1}}, {5}},
      {"starts in the middle", {{0, 0, 1, 2}}, {5}},
      {"another message's fragment", {{0, 0, 0, 2}, {1, 1, 1, 2}}, {5, 5}},
      {"fragment count changes", {{0, 0, 0, 2}, {1, 0, 1, 3}}, {5, 5}},
      {"fragment index skipped", {{0, 0, 0, 3}, {1, 0, 2, 3}}, {5, 5}},
      {"middle fragment of another size", {{0, 0, 0, 3}, {1, 0, 1, 3}}, {5, 4}},
      {"last fragment longer", {{0, 0, 0, 2}, {1, 0, 1, 2}}, {5, 6}},
      {"message too large", {{0, 0, 0, 5000}}, {1400}},
  };
  for (const Case& test : cases) {
    Config config = small_config();
    config.max_message_bytes = 1 << 20;
    PeerReceiver receiver(config, 3);
    Status status;
    for (std::size_t i = 0; i < test.fields.size(); ++i) {
      status = receiver.on_data(test.fields[i], bytes_of(test.sizes[i], 1), kT0);
    }
    EXPECT_EQ(status.code(), ErrorCode::kMalformedFrame) << test.what;
    EXPECT_NE(status.message().find("rank 3"), std::string::npos) << status.message();
    EXPECT_EQ(receiver.failure().code(), ErrorCode::kMalformedFrame) << test.what;
    EXPECT_FALSE(receiver.on_data({100, 0, 0, 1}, bytes_of(1, 1), kT0).ok()) << test.what;
    EXPECT_FALSE(receiver.take_ack(kT0).has_value()) << test.what;
  }
}

}  // namespace
}  // namespace gradgate::gateway::reliable::testing
