// TcpTransport against misbehaving peers and callers: strangers, broken frames, rejected
// messages, floods, peers that stop reading, and invalid sends.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "tests/unit/transport/transport_test_support.h"

namespace gradgate::gateway::testing {
namespace {

constexpr uint64_t kJob = 7;

std::vector<std::byte> bytes_of(std::size_t size, std::byte fill) {
  return std::vector<std::byte>(size, fill);
}

// A raw peer that handshakes with `transport` as `rank` and reads the answer.
std::unique_ptr<RawPeer> handshaken_raw_peer(const TcpTransport& transport, uint32_t rank,
                                             int receive_buffer = 0) {
  auto peer = std::make_unique<RawPeer>(transport.listen_port(), receive_buffer);
  tcp::Hello answer;
  if (!peer->connected() || !peer->send_hello(kJob, rank) || !peer->read_hello(&answer)) return {};
  if (answer.job_id != kJob || answer.rank != 0 || answer.resumed) return {};
  return peer;
}

TEST(TcpRobustnessTest, ForeignHandshakesAreRefusedAndCounted) {
  auto nodes = start_mesh(2);
  ASSERT_EQ(nodes.size(), 2u);
  TcpTransport& transport = *nodes[0].transport;

  RawPeer wrong_magic(transport.listen_port());
  ASSERT_TRUE(wrong_magic.send_bytes(bytes_of(tcp::kHandshakeBytes, std::byte{'X'})));
  EXPECT_EQ(wrong_magic.read_until_closed(), 0) << "a stranger must get no answer";

  const std::vector<tcp::Hello> refused = {
      {kJob + 1, 1},  // another job
      {kJob, 0},      // the transport's own rank
      {kJob, 2},      // no such rank in a world of 2
  };
  for (const tcp::Hello& hello : refused) {
    RawPeer peer(transport.listen_port());
    ASSERT_TRUE(peer.send_hello(hello.job_id, hello.rank));
    EXPECT_EQ(peer.read_until_closed(), 0) << "job " << hello.job_id << " rank " << hello.rank;
  }
  EXPECT_TRUE(eventually([&] { return transport.stats().foreign == 4u; }));
  EXPECT_EQ(transport.stats().connects, 1u);
  EXPECT_EQ(nodes[0].recorder->ups(1), 1);
  // The real peer is untouched.
  ASSERT_TRUE(nodes[1].transport->send(0, numbered_message(1, 0)).ok());
  EXPECT_TRUE(eventually([&] { return nodes[0].recorder->count_from(1) == 1; }));
}

TEST(TcpRobustnessTest, ALowerRankDialingAnotherJobIsRefused) {
  std::vector<uint16_t> ports;
  Node other_job = start_node(loopback_options(0, 2, {}, 0, kJob + 1), &ports);
  ASSERT_TRUE(other_job.transport);
  Node ours = start_node(loopback_options(1, 2, ports, 0, kJob));
  ASSERT_TRUE(ours.transport);
  EXPECT_TRUE(eventually([&] { return other_job.transport->stats().foreign >= 2u; }))
      << "the dialer retries with backoff and is refused every time";
  EXPECT_FALSE(ours.transport->peer_up(0));
  EXPECT_EQ(other_job.transport->stats().connects, 0u);
}

TEST(TcpRobustnessTest, AHandshakeThatNeverAnswersTimesOutAndIsRedialed) {
  SilentListener hanging;
  TcpTransportOptions options = loopback_options(1, 2, {hanging.port()});
  options.connect_timeout = std::chrono::milliseconds(100);
  Node node = start_node(options);
  ASSERT_TRUE(node.transport);
  const int first = hanging.accept_one();
  ASSERT_GE(first, 0);
  EXPECT_TRUE(SilentListener::closed_by_peer(first)) << "the attempt must time out";
  EXPECT_GE(hanging.accept_one(), 0) << "and be followed by another one";
  const TransportStats stats = node.transport->stats();
  EXPECT_EQ(stats.connects, 0u);
  EXPECT_EQ(node.recorder->ups(0), 0);
}

// Rank 0 of a 3-gateway job under test and a well-behaved rank 1; rank 2 is played by raw peers.
std::pair<Node, Node> start_with_good_peer() {
  std::vector<uint16_t> ports;
  Node node = start_node(loopback_options(0, 3, {}), &ports);
  Node good = node.transport ? start_node(loopback_options(1, 3, ports)) : Node{};
  return {std::move(node), std::move(good)};
}

TEST(TcpRobustnessTest, BadFramesResetTheConnectionAndOtherPeersKeepWorking) {
  auto started = start_with_good_peer();
  Node& node = started.first;
  Node& good = started.second;
  ASSERT_TRUE(node.transport && good.transport);
  // Both sides: each marks the link up when its own end of the handshake is done.
  ASSERT_TRUE(eventually([&] { return node.transport->peer_up(1) && good.transport->peer_up(0); }));

  {
    auto oversized = handshaken_raw_peer(*node.transport, 2);
    ASSERT_TRUE(oversized);
    ASSERT_TRUE(oversized->send_frame(uint32_t{1} << 31, {}));
    EXPECT_EQ(oversized->read_until_closed(), 0);
  }
  EXPECT_TRUE(eventually([&] { return node.transport->stats().rejected == 1u; }));
  {
    auto rejected = handshaken_raw_peer(*node.transport, 2);
    ASSERT_TRUE(rejected);
    const auto body = bytes_of(16, Recorder::kRejectMarker);
    ASSERT_TRUE(rejected->send_frame(16, body));
    EXPECT_EQ(rejected->read_until_closed(), 0);
  }
  EXPECT_TRUE(eventually([&] { return node.transport->stats().rejected == 2u; }));
  EXPECT_EQ(node.recorder->ups(2), 2);
  EXPECT_TRUE(eventually([&] { return node.recorder->downs(2) == 2; }));
  EXPECT_EQ(node.recorder->count_from(2), 0u);

  ASSERT_TRUE(good.transport->send(0, numbered_message(1, 0)).ok());
  ASSERT_TRUE(node.transport->send(1, numbered_message(0, 0)).ok());
  EXPECT_TRUE(eventually([&] { return node.recorder->count_from(1) == 1; }));
  EXPECT_TRUE(eventually([&] { return good.recorder->count_from(0) == 1; }));
  EXPECT_EQ(node.recorder->downs(1), 0);
}

TEST(TcpRobustnessTest, TenThousandBadMessagesAreAllCountedWithoutHarm) {
  auto started = start_with_good_peer();
  Node& node = started.first;
  Node& good = started.second;
  ASSERT_TRUE(node.transport && good.transport);
  // Both sides: each marks the link up when its own end of the handshake is done.
  ASSERT_TRUE(eventually([&] { return node.transport->peer_up(1) && good.transport->peer_up(0); }));

  constexpr uint32_t kBad = 10'000;
  const auto rejected_body = bytes_of(8, Recorder::kRejectMarker);
  for (uint32_t i = 0; i < kBad; ++i) {
    auto peer = handshaken_raw_peer(*node.transport, 2);
    ASSERT_TRUE(peer) << "attempt " << i;
    switch (i % 3) {
      case 0:  // a zero length
        ASSERT_TRUE(peer->send_frame(0, {}));
        break;
      case 1:  // a length above the limit
        ASSERT_TRUE(peer->send_frame(0xFFFFFFFFu, rejected_body));
        break;
      default:  // a message the handler rejects
        ASSERT_TRUE(peer->send_frame(8, rejected_body));
        break;
    }
    ASSERT_EQ(peer->read_until_closed(), 0) << "attempt " << i;
  }
  EXPECT_TRUE(eventually([&] { return node.transport->stats().rejected == kBad; }));
  EXPECT_TRUE(eventually([&] { return node.recorder->downs(2) == static_cast<int>(kBad); }));
  const TransportStats stats = node.transport->stats();
  EXPECT_EQ(stats.connects, kBad + 1);
  EXPECT_EQ(stats.disconnects, kBad);
  EXPECT_EQ(stats.peers_up, 1u);
  ASSERT_TRUE(good.transport->send(0, numbered_message(1, 0)).ok());
  EXPECT_TRUE(eventually([&] { return node.recorder->count_from(1) == 1; }));
}

TEST(TcpRobustnessTest, ANewConnectionFromTheSameRankReplacesTheOldOne) {
  std::vector<uint16_t> ports;
  Node node = start_node(loopback_options(0, 2, {}), &ports);
  ASSERT_TRUE(node.transport);
  auto first = handshaken_raw_peer(*node.transport, 1);
  ASSERT_TRUE(first);
  ASSERT_TRUE(eventually([&] { return node.recorder->ups(1) == 1; }));
  auto second = handshaken_raw_peer(*node.transport, 1);
  ASSERT_TRUE(second);
  EXPECT_EQ(first->read_until_closed(), 0) << "the old connection must be closed";
  ASSERT_TRUE(eventually([&] { return node.recorder->ups(1) == 2; }));
  EXPECT_EQ(node.recorder->downs(1), 1);
  EXPECT_EQ(node.transport->stats().peers_up, 1u);
  const auto body = bytes_of(5, std::byte{1});
  ASSERT_TRUE(second->send_frame(5, body));
  ASSERT_TRUE(eventually([&] { return node.recorder->count_from(1) == 1; }));
  EXPECT_TRUE(std::ranges::equal(node.recorder->messages_from(1)[0], body));
}

TEST(TcpRobustnessTest, SendToADownPeerIsUnavailable) {
  std::vector<uint16_t> ports;
  Node node = start_node(loopback_options(0, 2, {}), &ports);
  ASSERT_TRUE(node.transport);
  EXPECT_FALSE(node.transport->peer_up(1));
  EXPECT_EQ(node.transport->send(1, numbered_message(0, 0)).code(), ErrorCode::kUnavailable);
  TcpTransport not_started(loopback_options(0, 2, {}));
  EXPECT_EQ(not_started.send(1, numbered_message(0, 0)).code(), ErrorCode::kUnavailable);
}

TEST(TcpRobustnessTest, InvalidSendsAreRefused) {
  TcpTransportOptions options = loopback_options(0, 2, {});
  options.max_message_bytes = 1024;
  Node node = start_node(options);
  ASSERT_TRUE(node.transport);
  auto peer = handshaken_raw_peer(*node.transport, 1);
  ASSERT_TRUE(peer);
  ASSERT_TRUE(eventually([&] { return node.transport->peer_up(1); }));
  TcpTransport& transport = *node.transport;
  EXPECT_EQ(transport.send(0, numbered_message(0, 0)).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(transport.send(2, numbered_message(0, 0)).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(transport.send(1, numbered_message(0, 0, 1025)).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(transport.send(1, std::make_shared<MessageBytes>()).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(transport.send(1, nullptr).code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(transport.send(1, numbered_message(0, 0, 1024)).ok());
}

TEST(TcpRobustnessTest, InvalidOptionsAndABusyPortFailToStart) {
  TcpTransportOptions bad_rank = loopback_options(2, 2, {});
  EXPECT_EQ(TcpTransport(bad_rank).start({}).code(), ErrorCode::kInvalidArgument);
  TcpTransportOptions bad_limit = loopback_options(0, 2, {});
  bad_limit.max_message_bytes = 1ull << 32;
  EXPECT_EQ(TcpTransport(bad_limit).start({}).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(TcpTransport(loopback_options(1, 2, {})).start({}).code(), ErrorCode::kInvalidArgument)
      << "rank 0 has no address to dial";

  Node listening = start_node(loopback_options(0, 2, {}));
  ASSERT_TRUE(listening.transport);
  TcpTransport clash(loopback_options(0, 2, {}, listening.transport->listen_port()));
  EXPECT_EQ(clash.start({}).code(), ErrorCode::kUnavailable);
}

// The most a TCP socket's send buffer grows to (tcp(7): net.ipv4.tcp_wmem's maximum); 0 when
// it cannot be read.
uint64_t largest_send_buffer() {
  std::ifstream in("/proc/sys/net/ipv4/tcp_wmem");
  uint64_t least = 0, initial = 0, most = 0;
  in >> least >> initial >> most;
  return most;
}

TEST(TcpRobustnessTest, APeerThatDoesNotReadHitsTheQueueCap) {
  const uint64_t kernel_takes = largest_send_buffer();
  ASSERT_GT(kernel_takes, 0u) << "net.ipv4.tcp_wmem could not be read";
  constexpr std::size_t kMessage = 1u << 20;
  constexpr uint64_t kFramed = tcp::kLengthPrefixBytes + kMessage;
  // A cap far above what the kernel takes in (the sender's largest send buffer, and the silent
  // peer's small fixed receive buffer): once the cap refuses a message, the transport's writer,
  // whenever it runs, can hand the kernel only part of what is queued.
  TcpTransportOptions options = loopback_options(0, 2, {});
  options.send_queue_bytes = 2 * kernel_takes + 4 * kFramed;
  Node node = start_node(options);
  ASSERT_TRUE(node.transport);
  auto silent = handshaken_raw_peer(*node.transport, 1, 64 << 10);
  ASSERT_TRUE(silent);
  ASSERT_TRUE(eventually([&] { return node.transport->peer_up(1); }));

  const uint64_t most_messages = (options.send_queue_bytes + 2 * kernel_takes) / kMessage + 8;
  Status status;
  uint64_t accepted = 0;
  for (; accepted < most_messages; ++accepted) {
    status =
        node.transport->send(1, numbered_message(0, static_cast<uint32_t>(accepted), kMessage));
    if (!status.ok()) break;
  }
  EXPECT_EQ(status.code(), ErrorCode::kResourceExhausted) << status.to_string();
  EXPECT_GE(accepted, options.send_queue_bytes / kFramed);
  const uint64_t queued = node.transport->stats().queued_bytes;
  EXPECT_GT(queued, kernel_takes / 2) << "the kernel cannot have taken in what the queue held";
  EXPECT_LE(queued, options.send_queue_bytes);

  silent.reset();  // the peer goes away: what is queued is dropped
  EXPECT_TRUE(eventually([&] { return !node.transport->peer_up(1); }));
  EXPECT_TRUE(eventually([&] { return node.transport->stats().queued_bytes == 0; }));
  EXPECT_EQ(node.transport->stats().disconnects, 1u);
}

}  // namespace
}  // namespace gradgate::gateway::testing
