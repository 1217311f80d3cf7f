// TcpTransport between real transports on loopback: mesh formation, ordered delivery both ways,
// large messages, reconnection after a restart, and shutdown.
#include <gtest/gtest.h>

#include "tests/unit/transport/transport_test_support.h"

namespace gradgate::gateway::testing {
namespace {

// Sends `count` numbered messages from every node to every other and checks that each arrives
// once, intact and in order.
void exchange_all_pairs(std::vector<Node>& nodes, uint32_t count, uint32_t first_sequence = 0) {
  const auto world = static_cast<uint32_t>(nodes.size());
  for (uint32_t seq = first_sequence; seq < first_sequence + count; ++seq) {
    for (uint32_t from = 0; from < world; ++from) {
      for (uint32_t to = 0; to < world; ++to) {
        if (from == to) continue;
        const Status status = nodes[from].transport->send(to, numbered_message(from, seq));
        ASSERT_TRUE(status.ok()) << from << "->" << to << ": " << status.to_string();
      }
    }
  }
  for (uint32_t to = 0; to < world; ++to) {
    for (uint32_t from = 0; from < world; ++from) {
      if (from == to) continue;
      const Recorder& recorder = *nodes[to].recorder;
      ASSERT_TRUE(eventually([&] { return recorder.count_from(from) >= first_sequence + count; }))
          << from << "->" << to << " got " << recorder.count_from(from);
      const auto messages = recorder.messages_from(from);
      ASSERT_EQ(messages.size(), first_sequence + count);
      for (uint32_t seq = 0; seq < messages.size(); ++seq) {
        ASSERT_EQ(messages[seq], *numbered_message(from, seq)) << from << "->" << to << " #" << seq;
      }
    }
  }
}

TEST(TcpMeshTest, TwoTransportsConnectAndExchangeInOrderBothWays) {
  auto nodes = start_mesh(2);
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_TRUE(nodes[0].transport->peer_up(1));
  EXPECT_TRUE(nodes[1].transport->peer_up(0));
  EXPECT_EQ(nodes[0].recorder->ups(1), 1);
  EXPECT_EQ(nodes[1].recorder->ups(0), 1);
  exchange_all_pairs(nodes, 500);
  const TransportStats stats = nodes[0].transport->stats();
  EXPECT_EQ(stats.messages_received, 500u);
  // The messages, and the peer's acknowledgements of what it got (13 framed bytes each).
  ASSERT_GE(stats.bytes_received, 500u * (64 + 4));
  EXPECT_EQ((stats.bytes_received - 500u * (64 + 4)) % (tcp::kLengthPrefixBytes + tcp::kAckBytes),
            0u);
  EXPECT_TRUE(eventually([&] { return nodes[0].transport->stats().messages_sent == 500u; }));
  EXPECT_EQ(stats.connects, 1u);
  EXPECT_EQ(stats.disconnects, 0u);
  EXPECT_EQ(stats.foreign, 0u);
}

// transport.listen may be a host name (here from /etc/hosts: no DNS is asked), and the peers may
// dial one; a port in use fails start, naming the address.
TEST(TcpMeshTest, ListensOnAHostNameAndFailsOnAPortInUse) {
  std::vector<uint16_t> ports;
  TcpTransportOptions first = loopback_options(0, 2, ports);
  first.listen.host = "localhost";
  Node listening = start_node(first, &ports);
  ASSERT_TRUE(listening.transport);
  TcpTransportOptions second = loopback_options(1, 2, ports);
  second.peers[0].host = "localhost";
  Node dialing = start_node(second, &ports);
  ASSERT_TRUE(dialing.transport);
  EXPECT_TRUE(eventually([&] { return listening.transport->peer_up(1); }));

  TcpTransport taken(loopback_options(0, 2, {}, ports[0]));
  Recorder recorder;
  const Status refused = taken.start(recorder.handlers());
  EXPECT_EQ(refused.code(), ErrorCode::kUnavailable);
  EXPECT_NE(
      refused.message().find("transport: cannot bind to 127.0.0.1:" + std::to_string(ports[0])),
      std::string::npos)
      << refused.to_string();
}

TEST(TcpMeshTest, FourTransportsFormAFullMeshWithOneConnectionPerPair) {
  auto nodes = start_mesh(4);
  ASSERT_EQ(nodes.size(), 4u);
  for (uint32_t rank = 0; rank < 4; ++rank) {
    for (uint32_t peer = 0; peer < 4; ++peer) {
      if (peer == rank) continue;
      EXPECT_TRUE(nodes[rank].transport->peer_up(peer)) << rank << "-" << peer;
      EXPECT_EQ(nodes[rank].recorder->ups(peer), 1) << rank << "-" << peer;
    }
    EXPECT_EQ(nodes[rank].transport->stats().connects, 3u);
  }
  exchange_all_pairs(nodes, 100);
}

TEST(TcpMeshTest, A64MiBMessageArrivesIntactBothWays) {
  auto nodes = start_mesh(2);
  ASSERT_EQ(nodes.size(), 2u);
  constexpr std::size_t kSize = 64u << 20;
  const Message from0 = numbered_message(0, 1, kSize);
  const Message from1 = numbered_message(1, 2, kSize);
  ASSERT_TRUE(nodes[0].transport->send(1, from0).ok());
  ASSERT_TRUE(nodes[1].transport->send(0, from1).ok());
  ASSERT_TRUE(eventually([&] { return nodes[1].recorder->count_from(0) == 1; }));
  ASSERT_TRUE(eventually([&] { return nodes[0].recorder->count_from(1) == 1; }));
  EXPECT_TRUE(nodes[1].recorder->messages_from(0)[0] == *from0);
  EXPECT_TRUE(nodes[0].recorder->messages_from(1)[0] == *from1);
  EXPECT_TRUE(eventually([&] { return nodes[0].transport->stats().queued_bytes == 0; }));
}

TEST(TcpMeshTest, RestartedPeersOnTheSamePortAreReconnected) {
  auto nodes = start_mesh(2);
  ASSERT_EQ(nodes.size(), 2u);
  const std::vector<uint16_t> ports = {nodes[0].transport->listen_port(),
                                       nodes[1].transport->listen_port()};
  exchange_all_pairs(nodes, 10);

  // The accepting side (rank 0) restarts: rank 1 notices and redials with backoff.
  nodes[0].transport.reset();
  ASSERT_TRUE(eventually([&] { return nodes[1].recorder->downs(0) == 1; }));
  EXPECT_FALSE(nodes[1].transport->peer_up(0));
  nodes[0] = start_node(loopback_options(0, 2, {}, ports[0]));
  ASSERT_TRUE(nodes[0].transport) << "rank 0 could not bind its old port again";
  ASSERT_TRUE(eventually([&] { return nodes[1].recorder->ups(0) == 2; }));
  ASSERT_TRUE(eventually([&] { return nodes[0].recorder->ups(1) == 1; }));
  // Each report came once the transport itself told the change (the mailbox reads it there).
  using Liveness = Recorder::Liveness;
  EXPECT_EQ(nodes[1].recorder->liveness(0),
            (std::vector<Liveness>{{true, 0}, {false, 1}, {true, 1}}));
  EXPECT_EQ(nodes[1].transport->peer_down_count(0), 1u);
  TransportStats stats = nodes[1].transport->stats();
  EXPECT_EQ(stats.connects, 2u);
  EXPECT_EQ(stats.disconnects, 1u);
  ASSERT_TRUE(nodes[1].transport->send(0, numbered_message(1, 0)).ok());
  ASSERT_TRUE(nodes[0].transport->send(1, numbered_message(0, 10)).ok());
  ASSERT_TRUE(eventually([&] { return nodes[0].recorder->count_from(1) == 1; }));
  ASSERT_TRUE(eventually([&] { return nodes[1].recorder->count_from(0) == 11; }));

  // The dialing side (rank 1) restarts on its port: rank 0 takes the new connection.
  nodes[1].transport.reset();
  nodes[1] = start_node(loopback_options(1, 2, {ports[0]}, ports[1]));
  ASSERT_TRUE(nodes[1].transport) << "rank 1 could not bind its old port again";
  ASSERT_TRUE(eventually([&] { return nodes[1].transport->peer_up(0); }));
  ASSERT_TRUE(eventually([&] { return nodes[0].recorder->ups(1) == 2; }));
  ASSERT_TRUE(eventually([&] { return nodes[0].transport->stats().connects == 2u; }));
  EXPECT_EQ(nodes[0].transport->stats().disconnects, 1u);
  EXPECT_EQ(nodes[0].recorder->downs(1), 1);
  ASSERT_TRUE(nodes[0].transport->send(1, numbered_message(0, 0)).ok());
  ASSERT_TRUE(eventually([&] { return nodes[1].recorder->count_from(0) == 1; }));
}

TEST(TcpMeshTest, StopIsIdempotentAndNoHandlerRunsAfterIt) {
  auto nodes = start_mesh(2);
  ASSERT_EQ(nodes.size(), 2u);
  for (uint32_t seq = 0; seq < 200; ++seq) {
    ASSERT_TRUE(nodes[1].transport->send(0, numbered_message(1, seq, 4096)).ok());
  }
  nodes[0].transport->stop();
  nodes[0].recorder->forbid_calls();
  EXPECT_FALSE(nodes[0].transport->peer_up(1));
  EXPECT_EQ(nodes[0].transport->stats().peers_up, 0u);
  EXPECT_EQ(nodes[0].transport->send(1, numbered_message(0, 0)).code(), ErrorCode::kUnavailable);
  // The other side sees the connection go and keeps redialing; rank 0 stays silent.
  ASSERT_TRUE(eventually([&] { return !nodes[1].transport->peer_up(0); }));
  for (uint32_t seq = 0; seq < 10; ++seq) {
    EXPECT_FALSE(nodes[1].transport->send(0, numbered_message(1, seq)).ok());
  }
  nodes[0].transport->stop();
  EXPECT_EQ(nodes[0].transport->start(nodes[0].recorder->handlers()).code(), ErrorCode::kAborted);
  nodes[0].transport.reset();
  EXPECT_EQ(nodes[0].recorder->calls_after_forbid(), 0);
}

}  // namespace
}  // namespace gradgate::gateway::testing
