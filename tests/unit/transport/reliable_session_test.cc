// Sessions: the configuration check, when a peer counts as lost (a message past its deadline,
// silence while data is outstanding), and restarts recognised by their epochs.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>

#include "tests/unit/transport/lossy_link.h"

namespace gradgate::gateway::reliable::testing {
namespace {

Message message_of(std::size_t size, uint8_t fill) {
  return std::make_shared<MessageBytes>(size, std::byte{fill});
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(ReliableConfigTest, CheckNamesTheBadKnob) {
  EXPECT_TRUE(check(Config{}).ok());
  EXPECT_TRUE(check(fast_link_config()).ok());
  const std::vector<std::pair<std::string, std::function<void(Config&)>>> bad = {
      {"payload_bytes", [](Config& c) { c.payload_bytes = 0; }},
      {"payload_bytes", [](Config& c) { c.payload_bytes = 70000; }},
      {"window_packets", [](Config& c) { c.window_packets = 0; }},
      {"receive_window_packets", [](Config& c) { c.receive_window_packets = 0; }},
      {"min_rto", [](Config& c) { c.min_rto = microseconds(0); }},
      {"max_rto", [](Config& c) { c.max_rto = c.min_rto - microseconds(1); }},
      {"initial_rto", [](Config& c) { c.initial_rto = c.max_rto + microseconds(1); }},
      {"ack_every_packets", [](Config& c) { c.ack_every_packets = 0; }},
      {"ack_delay", [](Config& c) { c.ack_delay = c.min_rto; }},
      {"message_deadline", [](Config& c) { c.message_deadline = milliseconds(0); }},
      {"peer_timeout", [](Config& c) { c.peer_timeout = milliseconds(100); }},
      {"max_message_bytes", [](Config& c) { c.max_message_bytes = 0; }},
      {"max_message_bytes",
       [](Config& c) {
         c.payload_bytes = 1;
         c.max_message_bytes = c.max_queued_bytes = 1ull << 33;
       }},
      {"max_queued_bytes", [](Config& c) { c.max_queued_bytes = c.max_message_bytes - 1; }},
  };
  for (const auto& [knob, spoil] : bad) {
    Config config;
    spoil(config);
    const Status status = check(config);
    EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument) << knob;
    EXPECT_TRUE(contains(status.message(), knob)) << knob << ": " << status.message();
  }
}

/// Steps `pair` until a's session is lost; returns when (or nothing within `max_steps`).
std::optional<Clock::time_point> time_a_is_lost(SessionPair& pair, int max_steps) {
  for (int step = 0; step < max_steps; ++step) {
    pair.step();
    if (!pair.a.session.status().ok()) return pair.now;
    if (!pair.advance()) break;
  }
  return std::nullopt;
}

TEST(ReliableSessionTest, AMessageNeverAcknowledgedFailsAtItsDeadline) {
  Config config = fast_link_config();
  config.message_deadline = milliseconds(1000);
  config.peer_timeout = milliseconds(60'000);
  Impairments black_hole;
  black_hole.drop = 1.0;
  SessionPair pair(config, black_hole, {}, 3);
  const Clock::time_point queued = pair.now;
  ASSERT_EQ(*pair.a.session.send(message_of(10'000, 1), queued), 0u);

  const std::optional<Clock::time_point> lost = time_a_is_lost(pair, 10'000);
  ASSERT_TRUE(lost.has_value());
  const Status& status = pair.a.session.status();
  EXPECT_EQ(status.code(), ErrorCode::kTimeout) << status.to_string();
  EXPECT_TRUE(contains(status.message(), "not acknowledged within 1000 ms by rank 1"))
      << status.message();
  ASSERT_TRUE(pair.a.session.sender().failure().has_value());
  EXPECT_EQ(pair.a.session.sender().failure()->message_id, 0u);
  EXPECT_GE(*lost, queued + config.message_deadline);
  EXPECT_LE(*lost, queued + config.message_deadline + pair.a.session.sender().rtt().rto());
  // It was retransmitted with backoff all along, then given up.
  const SenderCounters counters = pair.a.session.sender().counters();
  EXPECT_EQ(counters.retransmits_timeout, 8u * 8)
      << "8 packets, each sent again at 10, 30, 70, 150, 310, 510, 710 and 910 ms";
  EXPECT_EQ(counters.queued_bytes, 0u);
  EXPECT_EQ(pair.a.session.send(message_of(10, 1), pair.now).status().code(),
            ErrorCode::kUnavailable);
  EXPECT_TRUE(pair.a.session.poll(pair.now + milliseconds(500)).empty());
  EXPECT_FALSE(pair.a.session.next_timer().has_value());
}

TEST(ReliableSessionTest, SilenceWhileDataIsOutstandingLosesThePeer) {
  Config config = fast_link_config();
  config.peer_timeout = milliseconds(500);
  SessionPair pair(config, {}, {}, 4);
  ASSERT_TRUE(pair.a.session.send(message_of(5000, 1), pair.now).ok());
  ASSERT_TRUE(pair.run_until(
      [&] { return pair.a.session.sender().counters().messages_acknowledged == 1; }, 1000));
  // Idle for longer than the timeout: nothing is outstanding, so nothing is wrong.
  pair.now += std::chrono::seconds(2);
  EXPECT_TRUE(pair.a.session.poll(pair.now).empty());
  EXPECT_TRUE(pair.a.session.status().ok()) << pair.a.session.status().to_string();

  Impairments black_hole;
  black_hole.drop = 1.0;
  pair.b_to_a().set_impairments(black_hole);  // rank 1 hears, but is never heard again
  const Clock::time_point sent = pair.now;
  ASSERT_TRUE(pair.a.session.send(message_of(5000, 2), sent).ok());
  const std::optional<Clock::time_point> lost = time_a_is_lost(pair, 10'000);
  ASSERT_TRUE(lost.has_value());
  EXPECT_EQ(pair.a.session.status().code(), ErrorCode::kUnavailable);
  EXPECT_TRUE(contains(pair.a.session.status().message(), "no packet from rank 1 for 500 ms"))
      << pair.a.session.status().message();
  EXPECT_GE(*lost, sent + config.peer_timeout);
  EXPECT_LE(*lost, sent + config.peer_timeout + config.max_rto);
  EXPECT_EQ(pair.b.received.size(), 2u) << "the data arrived; only the answers were lost";
}

/// Everything `session` has to transmit now, encoded.
std::vector<Datagram> transmit(Session& session, Clock::time_point now) {
  std::vector<Datagram> datagrams;
  for (const OutgoingData& data : session.poll(now)) {
    Datagram datagram(data_packet_bytes(data.length));
    EXPECT_TRUE(session.encode(data, datagram).ok());
    datagrams.push_back(std::move(datagram));
  }
  if (const auto ack = session.take_ack(now)) {
    Datagram datagram(ack_packet_bytes(ack->sack_count));
    EXPECT_TRUE(session.encode(*ack, datagram).ok());
    datagrams.push_back(std::move(datagram));
  }
  return datagrams;
}

class ReliableRestartTest : public ::testing::Test {
 protected:
  void deliver(Session& to, const Datagram& datagram) {
    const Status status = to.on_datagram(datagram, now_);
    EXPECT_TRUE(status.ok()) << status.to_string();
  }
  void deliver(Session& to, const std::vector<Datagram>& datagrams) {
    for (const Datagram& datagram : datagrams) deliver(to, datagram);
  }

  Config config_ = fast_link_config();
  Clock::time_point now_ = Clock::time_point{} + std::chrono::hours(1);
  Session a_{config_, {7, 0, 1, 0xA1}};
};

TEST_F(ReliableRestartTest, ANewPeerEpochResetsTheReceiveStateInsteadOfMixingSessions) {
  Session b1(config_, {7, 1, 0, 0xB1});
  ASSERT_TRUE(b1.send(message_of(2000, 1), now_).ok());      // sequences 0, 1
  ASSERT_TRUE(b1.send(message_of(5 * 1400, 2), now_).ok());  // sequences 2..6
  const std::vector<Datagram> old = transmit(b1, now_);
  ASSERT_EQ(old.size(), 7u);
  for (int sequence : {0, 1, 2, 4, 6}) deliver(a_, old[sequence]);
  const auto first = a_.take_message();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->bytes, *message_of(2000, 1));
  EXPECT_FALSE(a_.take_message().has_value()) << "the second message misses 3 and 5";
  ASSERT_TRUE(a_.send(message_of(100, 9), now_).ok());  // to the old peer, never acknowledged
  ASSERT_EQ(transmit(a_, now_).size(), 2u);             // the DATA and an ACK

  // Rank 1 restarts: same sequences and message ids, other bytes.
  Session b2(config_, {7, 1, 0, 0xB2});
  ASSERT_TRUE(b2.send(message_of(5 * 1400, 3), now_).ok());
  ASSERT_TRUE(b2.send(message_of(1, 4), now_).ok());
  deliver(a_, transmit(b2, now_));
  EXPECT_TRUE(a_.take_peer_restarted());
  EXPECT_FALSE(a_.take_peer_restarted()) << "said once";
  EXPECT_EQ(a_.peer_epoch(), 0xB2u);
  EXPECT_EQ(a_.counters().peer_restarts, 1u);
  EXPECT_EQ(a_.counters().messages_aborted, 1u);
  EXPECT_EQ(a_.sender().pending_messages(), 0u);
  for (uint8_t fill : {3, 4}) {
    const auto message = a_.take_message();
    ASSERT_TRUE(message.has_value()) << int{fill};
    EXPECT_EQ(message->id, fill - 3u);
    EXPECT_EQ(message->bytes, *message_of(fill == 3 ? 5 * 1400 : 1, fill));
  }
  EXPECT_FALSE(a_.take_message().has_value());

  // The old session's late packets are dropped, and do not restart anything again.
  deliver(a_, old[3]);
  deliver(a_, old[5]);
  EXPECT_EQ(a_.counters().stale, 2u);
  EXPECT_EQ(a_.counters().peer_restarts, 1u);
  EXPECT_FALSE(a_.take_message().has_value());
  EXPECT_TRUE(a_.status().ok());

  // The new peer gets an ACK for its epoch, of both its messages (after the ACK delay).
  now_ += milliseconds(1);
  const std::vector<Datagram> answer = transmit(a_, now_);
  ASSERT_EQ(answer.size(), 1u);
  const Result<PacketView> ack = decode_packet(answer[0]);
  ASSERT_TRUE(ack.ok());
  EXPECT_EQ(ack->header.receiver_epoch, 0xB2u);
  EXPECT_EQ(ack->ack.cumulative, 6u);
  deliver(b2, answer[0]);
  EXPECT_EQ(b2.sender().counters().messages_acknowledged, 2u);
}

TEST_F(ReliableRestartTest, DataForAnOldEpochTellsTheSenderToStartOver) {
  Session b1(config_, {7, 1, 0, 0xB1});
  ASSERT_TRUE(a_.send(message_of(300, 1), now_).ok());
  deliver(b1, transmit(a_, now_));
  now_ += milliseconds(1);
  deliver(a_, transmit(b1, now_));
  EXPECT_EQ(a_.peer_epoch(), 0xB1u);
  EXPECT_EQ(a_.sender().counters().messages_acknowledged, 1u);

  // Rank 1 restarts with nothing to say; rank 0's next message is for the old epoch.
  Session b2(config_, {7, 1, 0, 0xB2});
  ASSERT_TRUE(a_.send(message_of(300, 2), now_).ok());
  deliver(b2, transmit(a_, now_));
  EXPECT_EQ(b2.counters().stale, 1u);
  EXPECT_FALSE(b2.take_message().has_value());
  const std::vector<Datagram> answer = transmit(b2, now_);
  ASSERT_EQ(answer.size(), 1u) << "an ACK that carries the new epoch";
  deliver(a_, answer);
  EXPECT_TRUE(a_.take_peer_restarted());
  EXPECT_EQ(a_.counters().messages_aborted, 1u);

  // Both directions start over from sequence 0 and message 0.
  ASSERT_EQ(*a_.send(message_of(300, 3), now_), 0u);
  deliver(b2, transmit(a_, now_));
  const auto message = b2.take_message();
  ASSERT_TRUE(message.has_value());
  EXPECT_EQ(message->id, 0u);
  EXPECT_EQ(message->bytes, *message_of(300, 3));
  EXPECT_EQ(b2.counters().peer_restarts, 0u) << "rank 0 did not restart";
}

}  // namespace
}  // namespace gradgate::gateway::reliable::testing
