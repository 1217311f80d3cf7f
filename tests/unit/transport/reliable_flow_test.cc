// Flow control end to end: a receiver whose caller takes nothing stops the sender at its
// window, without losing the peer, and taking the messages lets the sender go on.
#include <gtest/gtest.h>

#include "tests/unit/transport/lossy_link.h"

namespace gradgate::gateway::reliable::testing {
namespace {

constexpr uint32_t kWindow = 64;
constexpr uint32_t kFragments = 8;  // per message
constexpr int kMessages = 40;

Message numbered(int number) {
  return std::make_shared<MessageBytes>(kFragments * 1400, std::byte(number));
}

TEST(ReliableFlowTest, AReceiverThatTakesNothingStopsTheSenderAtItsWindow) {
  Config config = fast_link_config();
  config.receive_window_packets = kWindow;
  config.peer_timeout = milliseconds(400);  // 2 max_rto: only the answered probes keep it up
  SessionPair pair(config, {}, {}, 1);
  pair.b.takes_messages = false;
  for (int i = 0; i < kMessages; ++i) ASSERT_TRUE(pair.a.session.send(numbered(i), pair.now).ok());

  uint64_t most_in_flight = 0;
  const Clock::time_point stalled_until = pair.now + std::chrono::seconds(2);
  pair.run_until(
      [&] {
        most_in_flight = std::max(most_in_flight, pair.a.session.sender().counters().in_flight);
        return pair.now >= stalled_until;
      },
      100'000);
  ASSERT_GE(pair.now, stalled_until);

  // The receiver holds a window's worth of whole messages, plus the fragments of the next one
  // that arrived while it was incomplete, and advertises a closed window.
  const PeerReceiver& receiver = pair.b.session.receiver();
  EXPECT_EQ(receiver.ready_messages(), kWindow / kFragments);
  EXPECT_EQ(receiver.window(), 0u);
  EXPECT_EQ(pair.a.session.sender().peer_window(), 0u);
  EXPECT_LE(most_in_flight, kWindow + kFragments - 1);
  const SenderCounters stalled = pair.a.session.sender().counters();
  EXPECT_EQ(stalled.messages_acknowledged, kWindow / kFragments);
  EXPECT_LE(stalled.packets_sent - stalled.retransmits_timeout - stalled.retransmits_fast,
            kWindow + kFragments)
      << "only the window, and one packet to probe it, left the sender";
  EXPECT_GT(receiver.counters().beyond_window, 0u) << "the probe was refused";
  EXPECT_LE(stalled.retransmits_timeout, 20u) << "probes back off";
  EXPECT_TRUE(pair.a.session.status().ok()) << pair.a.session.status().to_string();

  // Taking the messages reopens the window: everything arrives, in order, at once (the
  // receiver announces the open window; the sender does not wait for its next probe).
  pair.b.takes_messages = true;
  SessionPair::take_all(pair.b);
  const Clock::time_point resumed = pair.now;
  ASSERT_TRUE(pair.run_until([&] { return pair.b.received.size() == kMessages; }, 100'000))
      << pair.b.received.size() << " messages";
  EXPECT_LT(pair.now - resumed, config.min_rto);
  for (int i = 0; i < kMessages; ++i) {
    EXPECT_EQ(pair.b.received[i].id, static_cast<uint64_t>(i));
    EXPECT_EQ(pair.b.received[i].bytes, *numbered(i));
  }
  EXPECT_TRUE(pair.a.errors.empty());
  EXPECT_TRUE(pair.b.errors.empty());
  EXPECT_TRUE(pair.a.session.status().ok()) << pair.a.session.status().to_string();
}

}  // namespace
}  // namespace gradgate::gateway::reliable::testing
