// Sessions of the TCP transport: the message log that outlives connections (PeerSession alone),
// and real transports whose connection is reset or blackholed by a proxy between them (the
// messages arrive once, in order, and nobody is reported down), or whose peer restarts, stops,
// disappears or stays silent (reported down, with the reason counted).
#include "gateway/transport/tcp/peer_session.h"

#include <gtest/gtest.h>

#include "tests/unit/transport/tcp_proxy.h"
#include "tests/unit/transport/transport_test_support.h"

namespace gradgate::gateway::testing {
namespace {

using std::chrono::milliseconds;

uint64_t framed(const Message& message) { return tcp::kLengthPrefixBytes + message->size(); }

constexpr uint64_t kSession = 5;

// What the peer says in a handshake: its incarnation, the one of ours it knows, how many of our
// messages it delivered, and the session it holds.
tcp::Hello hello_of(uint64_t incarnation, uint64_t knows, uint64_t received,
                    uint64_t session = kSession) {
  return {.job_id = 1,
          .incarnation = incarnation,
          .peer_incarnation = knows,
          .received = received,
          .session_id = session};
}

TEST(PeerSessionTest, HoldsMessagesUntilAcknowledgedAndResumesFromTheDeliveredCount) {
  tcp::PeerSession session(1, 1 << 20);
  EXPECT_EQ(session.append(numbered_message(0, 0)).code(), ErrorCode::kUnavailable)
      << "closed before the first handshake";
  session.restart(/*peer_incarnation=*/42, kSession);
  std::vector<Message> sent;
  for (uint32_t i = 0; i < 5; ++i) {
    sent.push_back(numbered_message(0, i));
    ASSERT_TRUE(session.append(sent.back()).ok());
  }
  EXPECT_EQ(session.held_bytes(), 5 * framed(sent[0]));
  for (uint64_t seq = 0; seq < 3; ++seq) EXPECT_FALSE(session.note_written(seq));
  EXPECT_EQ(session.acknowledge(4).code(), ErrorCode::kMalformedFrame) << "only 3 were written";
  ASSERT_TRUE(session.acknowledge(2).ok());
  EXPECT_EQ(session.first_held(), 2u);
  EXPECT_EQ(session.message(1), nullptr);
  EXPECT_EQ(session.message(2), sent[2]);
  EXPECT_EQ(session.held_bytes(), 3 * framed(sent[0]));
  EXPECT_EQ(session.acknowledge(1).code(), ErrorCode::kMalformedFrame) << "acks never go back";

  // A new connection to the same peer incarnation, which knows ours and delivered 2 or 3.
  const uint64_t ours = 7;
  EXPECT_TRUE(session.can_resume(hello_of(42, ours, 3), ours));
  EXPECT_TRUE(session.can_resume(hello_of(42, ours, 2), ours));
  EXPECT_FALSE(session.can_resume(hello_of(43, ours, 3), ours)) << "the peer restarted";
  EXPECT_FALSE(session.can_resume(hello_of(42, ours + 1, 3), ours)) << "it knows another us";
  EXPECT_FALSE(session.can_resume(hello_of(42, ours, 3, kSession + 1), ours))
      << "it holds another session with us";
  EXPECT_FALSE(session.can_resume(hello_of(42, ours, 1), ours)) << "below what it acked";
  EXPECT_FALSE(session.can_resume(hello_of(42, ours, 4), ours)) << "beyond what was written";
  EXPECT_EQ(session.resume(2), 2u);
  EXPECT_TRUE(session.note_written(2)) << "written before the connection broke: a resend";
  EXPECT_FALSE(session.note_written(3));

  session.count_delivered();
  EXPECT_EQ(session.delivered(), 1u);
  session.restart(43, kSession + 1);  // the peer restarted: nothing of the old session is kept
  EXPECT_EQ(session.held_bytes(), 0u);
  EXPECT_EQ(session.delivered(), 0u);
  EXPECT_EQ(session.message(2), nullptr);
  EXPECT_EQ(session.peer_incarnation(), 43u);
  EXPECT_EQ(session.id(), kSession + 1);
  session.close();
  EXPECT_FALSE(session.open());
  EXPECT_EQ(session.peer_incarnation(), 0u);
  EXPECT_FALSE(session.can_resume(hello_of(43, ours, 0), ours));
}

TEST(PeerSessionTest, HeldBytesAreCapped) {
  const Message message = numbered_message(0, 0, 1000);
  tcp::PeerSession session(1, 3 * framed(message));
  session.restart(1, kSession);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(session.append(message).ok());
  EXPECT_EQ(session.append(message).code(), ErrorCode::kResourceExhausted);
  for (uint64_t seq = 0; seq < 3; ++seq) session.note_written(seq);
  ASSERT_TRUE(session.acknowledge(1).ok());
  EXPECT_TRUE(session.append(message).ok()) << "an acknowledgement makes room";
}

// Two transports, rank 1 dialing rank 0 through a proxy.
struct ProxiedPair {
  Node zero;
  std::unique_ptr<TcpProxy> proxy;
  Node one;
  bool up() const {
    return zero.transport && one.transport && zero.transport->peer_up(1) &&
           one.transport->peer_up(0);
  }
};

ProxiedPair start_proxied_pair(milliseconds peer_timeout = milliseconds(2000)) {
  ProxiedPair pair;
  TcpTransportOptions zero = loopback_options(0, 2, {});
  zero.peer_timeout = peer_timeout;
  pair.zero = start_node(zero);
  if (!pair.zero.transport) return pair;
  pair.proxy = std::make_unique<TcpProxy>(pair.zero.transport->listen_port());
  TcpTransportOptions one = loopback_options(1, 2, {pair.proxy->port()});
  one.peer_timeout = peer_timeout;
  pair.one = start_node(one);
  eventually([&] { return pair.up(); });
  return pair;
}

// Sends `count` messages of `size` bytes each way, calling `disturb` after each `every`.
void exchange(ProxiedPair& pair, uint32_t count, std::size_t size, uint32_t every,
              const std::function<void()>& disturb) {
  for (uint32_t seq = 0; seq < count; ++seq) {
    ASSERT_TRUE(pair.one.transport->send(0, numbered_message(1, seq, size)).ok()) << seq;
    ASSERT_TRUE(pair.zero.transport->send(1, numbered_message(0, seq, size)).ok()) << seq;
    if ((seq + 1) % every == 0) disturb();
  }
}

// Every message arrived once, intact and in order.
void expect_all_arrived(const Recorder& recorder, uint32_t from, uint32_t count, std::size_t size) {
  ASSERT_TRUE(eventually([&] { return recorder.count_from(from) >= count; }, milliseconds(30000)))
      << "got " << recorder.count_from(from) << " of " << count;
  const auto messages = recorder.messages_from(from);
  ASSERT_EQ(messages.size(), count);
  for (uint32_t seq = 0; seq < count; ++seq) {
    ASSERT_EQ(messages[seq], *numbered_message(from, seq, size)) << "message " << seq;
  }
}

TEST(TcpSessionTest, ResetConnectionsMidTransferLoseAndRepeatNothing) {
  ProxiedPair pair = start_proxied_pair();
  ASSERT_TRUE(pair.up());
  constexpr uint32_t kMessages = 60;
  constexpr std::size_t kSize = 1 << 20;
  constexpr uint32_t kBatch = 10;
  // Each batch queues 2 * kBatch MiB; the proxy resets from its own thread once it has forwarded
  // half of that beyond where the batch began, so the reset falls mid-transfer with much still
  // unacknowledged (a reset from here after seeing progress could fall after the whole batch).
  const auto arm_reset = [&] {
    pair.proxy->reset_at(pair.proxy->bytes_forwarded() + kBatch * kSize);
  };
  arm_reset();
  uint64_t resets = 0;
  exchange(pair, kMessages, kSize, kBatch, [&] {
    ++resets;
    ASSERT_TRUE(pair.proxy->wait_for_connections(resets + 1, kDeadline)) << "no reconnection";
    if (resets < kMessages / kBatch) arm_reset();
  });
  expect_all_arrived(*pair.zero.recorder, 1, kMessages, kSize);
  expect_all_arrived(*pair.one.recorder, 0, kMessages, kSize);
  for (const Node* node : {&pair.zero, &pair.one}) {
    const TransportStats stats = node->transport->stats();
    EXPECT_EQ(stats.reconnects, resets);
    EXPECT_EQ(stats.connects, resets + 1);
    EXPECT_EQ(stats.peers_up, 1u);
    for (const uint64_t down : stats.peers_down) EXPECT_EQ(down, 0u);
  }
  EXPECT_EQ(pair.zero.recorder->downs(1), 0);
  EXPECT_EQ(pair.one.recorder->downs(0), 0);
  EXPECT_EQ(pair.zero.recorder->ups(1), 1);
  const uint64_t resent =
      pair.zero.transport->stats().resent_messages + pair.one.transport->stats().resent_messages;
  EXPECT_GT(resent, 0u) << "a reset mid-transfer leaves something to write again";
  EXPECT_TRUE(eventually([&] { return pair.one.transport->stats().queued_bytes == 0; }))
      << "everything is acknowledged in the end";
}

TEST(TcpSessionTest, ALinkBlackholedForLessThanThePeerTimeoutComesBackWithEverything) {
  // Peers are down after 1.5 s of nothing. The proxy's kernel still acknowledges what fits its
  // buffers, so the connections stay (a real blackhole, which acknowledges nothing, closes them
  // after half the limit and reconnects: tests/e2e/silent_peer.py).
  ProxiedPair pair = start_proxied_pair(milliseconds(1500));
  ASSERT_TRUE(pair.up());
  constexpr uint32_t kMessages = 40;
  constexpr std::size_t kSize = 256 << 10;
  exchange(pair, kMessages, kSize, 20, [&] {
    pair.proxy->set_blackhole(true);
    std::this_thread::sleep_for(milliseconds(900));  // the fault's length
    pair.proxy->set_blackhole(false);
  });
  expect_all_arrived(*pair.zero.recorder, 1, kMessages, kSize);
  expect_all_arrived(*pair.one.recorder, 0, kMessages, kSize);
  EXPECT_EQ(pair.zero.recorder->downs(1), 0);
  EXPECT_EQ(pair.one.recorder->downs(0), 0);
}

TEST(TcpSessionTest, APeerSilentForThePeerTimeoutIsReportedDownOnBothSides) {
  ProxiedPair pair = start_proxied_pair(milliseconds(1000));
  ASSERT_TRUE(pair.up());
  pair.proxy->set_blackhole(true);
  const auto silent = static_cast<std::size_t>(PeerDownReason::kSilent);
  ASSERT_TRUE(eventually([&] { return pair.zero.recorder->downs(1) == 1; }));
  ASSERT_TRUE(eventually([&] { return pair.one.recorder->downs(0) == 1; }));
  EXPECT_EQ(pair.zero.transport->stats().peers_down[silent], 1u);
  EXPECT_EQ(pair.one.transport->stats().peers_down[silent], 1u);
  EXPECT_EQ(pair.one.transport->send(0, numbered_message(1, 0)).code(), ErrorCode::kUnavailable);
  // The link comes back: a fresh session, messages flow again.
  pair.proxy->set_blackhole(false);
  ASSERT_TRUE(eventually([&] { return pair.up(); }));
  EXPECT_EQ(pair.zero.recorder->ups(1), 2);
  ASSERT_TRUE(pair.one.transport->send(0, numbered_message(1, 0)).ok());
  EXPECT_TRUE(eventually([&] { return pair.zero.recorder->count_from(1) == 1; }));
}

TEST(TcpSessionTest, AStoppingPeerSaysGoodbyeAndARestartedOneIsANewSession) {
  std::vector<uint16_t> ports;
  Node zero = start_node(loopback_options(0, 2, {}), &ports);
  ASSERT_TRUE(zero.transport);
  TcpTransportOptions one_options = loopback_options(1, 2, ports);
  one_options.peer_timeout = milliseconds(60000);  // only the goodbye can end the session soon
  Node one = start_node(one_options);
  ASSERT_TRUE(eventually([&] { return zero.transport->peer_up(1) && one.transport->peer_up(0); }));
  zero.transport->stop();
  ASSERT_TRUE(eventually([&] { return one.recorder->downs(0) == 1; }, milliseconds(3000)))
      << "the goodbye ends the session at once";
  const auto stopped = static_cast<std::size_t>(PeerDownReason::kStopped);
  const auto refused = static_cast<std::size_t>(PeerDownReason::kRefused);
  const TransportStats stats = one.transport->stats();
  EXPECT_EQ(stats.peers_down[stopped] + stats.peers_down[refused], 1u);

  // Rank 0 comes back on its port: the new incarnation starts a fresh session.
  zero = start_node(loopback_options(0, 2, {}, ports[0]));
  ASSERT_TRUE(zero.transport);
  ASSERT_TRUE(eventually([&] { return one.recorder->ups(0) == 2; }));
  ASSERT_TRUE(one.transport->send(0, numbered_message(1, 0)).ok());
  ASSERT_TRUE(eventually([&] { return zero.recorder->count_from(1) == 1; }));

  // Rank 1 restarts without a goodbye reaching rank 0 (a peer that crashed and came back): its
  // new incarnation tells rank 0 that the old session is gone.
  const auto restarted = static_cast<std::size_t>(PeerDownReason::kRestarted);
  RawPeer crashed_and_back(zero.transport->listen_port());
  tcp::Hello answer;
  ASSERT_TRUE(crashed_and_back.send_hello(7, 1));
  ASSERT_TRUE(crashed_and_back.read_hello(&answer));
  EXPECT_FALSE(answer.resumed);
  ASSERT_TRUE(eventually([&] { return zero.recorder->ups(1) == 2; }));
  EXPECT_EQ(zero.recorder->downs(1), 1);
  EXPECT_EQ(zero.transport->stats().peers_down[restarted], 1u);
}

TEST(TcpSessionTest, AnAddressThatRefusesEndsTheSessionAtOnce) {
  std::vector<uint16_t> ports;
  Node zero = start_node(loopback_options(0, 2, {}), &ports);
  ASSERT_TRUE(zero.transport);
  auto proxy = std::make_unique<TcpProxy>(ports[0]);
  TcpTransportOptions one_options = loopback_options(1, 2, {proxy->port()});
  one_options.peer_timeout = milliseconds(60000);
  Node one = start_node(one_options);
  ASSERT_TRUE(eventually([&] { return one.transport->peer_up(0); }));
  // The proxy goes (nothing listens on its port any more) with a reset, as a crashed gateway's
  // host would answer: no goodbye, and every redial is refused.
  proxy->reset_all();
  proxy.reset();
  ASSERT_TRUE(eventually([&] { return one.recorder->downs(0) == 1; }, milliseconds(3000)));
  EXPECT_EQ(one.transport->stats().peers_down[static_cast<std::size_t>(PeerDownReason::kRefused)],
            1u);
}

TEST(TcpSessionTest, AResumptionWithAWrongDeliveredCountIsRefused) {
  std::vector<uint16_t> ports;
  Node zero = start_node(loopback_options(0, 2, {}), &ports);
  ASSERT_TRUE(zero.transport);
  RawPeer first(ports[0]);
  tcp::Hello answer;
  constexpr uint64_t kIncarnation = 0xabcdef;
  ASSERT_TRUE(first.send_hello(7, 1, kIncarnation));
  ASSERT_TRUE(first.read_hello(&answer));
  ASSERT_TRUE(eventually([&] { return zero.transport->peer_up(1); }));
  ASSERT_TRUE(zero.transport->send(1, numbered_message(0, 0)).ok());
  const uint64_t own_incarnation = answer.incarnation;
  // The same peer again, claiming it delivered 5 of the 1 message sent: not a resumption.
  RawPeer second(ports[0]);
  ASSERT_TRUE(second.send_hello(7, 1, kIncarnation, own_incarnation, 5, answer.session_id));
  ASSERT_TRUE(second.read_hello(&answer));
  EXPECT_FALSE(answer.resumed);
  EXPECT_EQ(answer.received, 0u);
  ASSERT_TRUE(eventually([&] { return zero.recorder->downs(1) == 1; }));
  EXPECT_EQ(zero.transport->stats().peers_down[static_cast<std::size_t>(PeerDownReason::kProtocol)],
            1u);
  // And the fresh session that followed resumes over another connection.
  RawPeer third(ports[0]);
  ASSERT_TRUE(third.send_hello(7, 1, kIncarnation, own_incarnation, 0, answer.session_id));
  ASSERT_TRUE(third.read_hello(&answer));
  EXPECT_TRUE(answer.resumed);
  EXPECT_EQ(zero.recorder->downs(1), 1);
}

}  // namespace
}  // namespace gradgate::gateway::testing

namespace gradgate::gateway::testing {
namespace {

TEST(TcpSessionTest, ADialerWhoseListenerIsGoneIsDownAtOnceOneThatListensIsWaitedFor) {
  TcpTransportOptions options = loopback_options(0, 3, {});
  options.peer_timeout = milliseconds(60000);  // only a look at the listener can end it soon
  Node zero = start_node(options);
  ASSERT_TRUE(zero.transport);
  // Ranks 1 and 2 listen (their processes live), and rank 0 looks at each listener once it has
  // their connection.
  SilentListener one_listens;
  auto two_listens = std::make_unique<SilentListener>();
  tcp::Hello answer;
  {
    RawPeer one(zero.transport->listen_port());
    one.set_listen_port(one_listens.port());
    ASSERT_TRUE(one.send_hello(7, 1) && one.read_hello(&answer));
    ASSERT_GE(one_listens.accept_one(), 0) << "rank 1's listener was looked at";
    RawPeer two(zero.transport->listen_port());
    two.set_listen_port(two_listens->port());
    ASSERT_TRUE(two.send_hello(7, 2) && two.read_hello(&answer));
    ASSERT_GE(two_listens->accept_one(), 0) << "rank 2's listener was looked at";
    ASSERT_TRUE(
        eventually([&] { return zero.transport->peer_up(1) && zero.transport->peer_up(2); }));
    two_listens.reset();  // rank 2's process is gone: its listener with it
  }
  // Both connections closed without a goodbye (as by a crash, or a reset): rank 2's address
  // refuses now, so it is gone; rank 1's listener answers, so its connection may yet come back.
  ASSERT_TRUE(eventually([&] { return zero.recorder->downs(2) == 1; }, milliseconds(3000)));
  EXPECT_EQ(zero.transport->stats().peers_down[static_cast<std::size_t>(PeerDownReason::kRefused)],
            1u);
  EXPECT_GE(one_listens.accept_one(), 0) << "rank 1's listener is looked at again";
  EXPECT_TRUE(zero.transport->peer_up(1));
  EXPECT_EQ(zero.recorder->downs(1), 0);
}

TEST(TcpSessionTest, AnAddressThatNeverAnsweredALookIsNotTakenForAGonePeer) {
  TcpTransportOptions options = loopback_options(0, 2, {});
  options.peer_timeout = milliseconds(1500);
  Node zero = start_node(options);
  ASSERT_TRUE(zero.transport);
  {
    RawPeer one(zero.transport->listen_port());  // says it listens where nothing does
    tcp::Hello answer;
    ASSERT_TRUE(one.send_hello(7, 1) && one.read_hello(&answer));
    ASSERT_TRUE(eventually([&] { return zero.transport->peer_up(1); }));
  }
  // Not `refused` (the address may be a wrong one, not a dead one): silent, after the timeout.
  ASSERT_TRUE(eventually([&] { return zero.recorder->downs(1) == 1; }, milliseconds(5000)));
  const TransportStats stats = zero.transport->stats();
  EXPECT_EQ(stats.peers_down[static_cast<std::size_t>(PeerDownReason::kRefused)], 0u);
  EXPECT_EQ(stats.peers_down[static_cast<std::size_t>(PeerDownReason::kSilent)], 1u);
}

}  // namespace
}  // namespace gradgate::gateway::testing
