// DpdkTransport in one process: two transports on two net_ring ports whose rings are crossed,
// so that each one's TX is the other's RX. Messages of every size arrive once and intact, also
// with lost, duplicated and reordered datagrams; errors and a lost peer behave like TCP's.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>

#include <rte_eth_ring.h>
#include <rte_ring.h>

#include "gateway/transport/dpdk_transport.h"
#include "tests/unit/transport/transport_test_support.h"

namespace gradgate::gateway::testing {
namespace {

using std::chrono::milliseconds;

dpdk::EalOptions test_eal() {
  dpdk::EalOptions eal;
  eal.no_huge = true;
  eal.no_pci = true;
  eal.memory_mb = 512;
  eal.extra_args = {"--log-level=warning"};
  return eal;
}

/// Two crossed ring ports (made once per pair), each with its own transport options.
struct RingPair {
  std::array<DpdkTransportOptions, 2> options;
  bool ok = false;

  explicit RingPair(dpdk::Impairments impairments = {}) {
    if (!dpdk::init_eal(test_eal()).ok()) return;
    static std::atomic<int> pairs{0};
    const std::string tag = std::to_string(pairs++);
    rte_ring* rings[2];
    for (int i = 0; i < 2; ++i) {
      rings[i] = rte_ring_create(("ggr" + tag + "_" + std::to_string(i)).c_str(), 8192,
                                 SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
      if (rings[i] == nullptr) return;
    }
    for (uint32_t rank = 0; rank < 2; ++rank) {
      const int id = rte_eth_from_rings(("net_ring_gg" + tag + "_" + std::to_string(rank)).c_str(),
                                        &rings[rank], 1, &rings[1 - rank], 1, SOCKET_ID_ANY);
      if (id < 0) return;
      DpdkTransportOptions& o = options[rank];
      o.job_id = 7;
      o.rank = rank;
      o.peers = {{"10.0.0.1", 4791}, {"10.0.0.2", 4791}};
      o.eal = test_eal();
      o.port.port_id = static_cast<uint16_t>(id);
      o.port.mbufs = 4095;
      o.peer_timeout = milliseconds(1000);
      o.hello_interval = milliseconds(20);
      o.message_deadline = milliseconds(10000);
      o.impairments = impairments;
      o.impairments.seed = 11 + rank;
    }
    ok = true;
  }
};

struct Started {
  std::array<Recorder, 2> recorders;
  std::array<std::unique_ptr<DpdkTransport>, 2> transports;
};

std::unique_ptr<Started> start_pair(const RingPair& pair) {
  auto started = std::make_unique<Started>();
  for (int rank = 0; rank < 2; ++rank) {
    started->transports[rank] = std::make_unique<DpdkTransport>(pair.options[rank]);
    started->recorders[rank].watch(*started->transports[rank]);
    if (!started->transports[rank]->start(started->recorders[rank].handlers()).ok()) return {};
  }
  const bool up = eventually(
      [&] { return started->recorders[0].ups(1) == 1 && started->recorders[1].ups(0) == 1; });
  if (!up) return {};
  return started;
}

void exchange_every_size(Started& nodes) {
  const std::vector<std::size_t> sizes = {8, 1399, 1400, 1401, 65536, 1u << 20, 16u << 20};
  for (uint32_t i = 0; i < sizes.size(); ++i) {
    ASSERT_TRUE(nodes.transports[0]->send(1, numbered_message(0, i, sizes[i])).ok());
    ASSERT_TRUE(nodes.transports[1]->send(0, numbered_message(1, i, sizes[i])).ok());
  }
  ASSERT_TRUE(eventually(
      [&] {
        return nodes.recorders[1].count_from(0) >= sizes.size() &&
               nodes.recorders[0].count_from(1) >= sizes.size();
      },
      std::chrono::seconds(30)));
  for (uint32_t to = 0; to < 2; ++to) {
    const auto got = nodes.recorders[to].messages_from(1 - to);
    ASSERT_EQ(got.size(), sizes.size());
    for (uint32_t i = 0; i < sizes.size(); ++i) {
      const Message want = numbered_message(1 - to, i, sizes[i]);
      ASSERT_EQ(got[i].size(), want->size());
      EXPECT_EQ(std::memcmp(got[i].data(), want->data(), want->size()), 0) << "message " << i;
    }
  }
}

TEST(DpdkTransportTest, DeliversEveryMessageOnceAndIntact) {
  RingPair pair;
  ASSERT_TRUE(pair.ok);
  auto nodes = start_pair(pair);
  ASSERT_TRUE(nodes);
  exchange_every_size(*nodes);
  const TransportStats stats = nodes->transports[0]->stats();
  EXPECT_EQ(stats.peers_up, 1u);
  EXPECT_EQ(stats.messages_received, 7u);
  EXPECT_GT(stats.bytes_sent, 17u << 20);
  EXPECT_TRUE(eventually([&] { return nodes->transports[0]->stats().messages_sent == 7u; }));
  EXPECT_TRUE(eventually([&] { return nodes->transports[0]->stats().poll_cpu_seconds > 0.0; }));
}

TEST(DpdkTransportTest, SurvivesLossDuplicationAndReordering) {
  RingPair pair(dpdk::Impairments{0.05, 0.01, 0.01, 0});
  ASSERT_TRUE(pair.ok);
  auto nodes = start_pair(pair);
  ASSERT_TRUE(nodes);
  exchange_every_size(*nodes);
  EXPECT_GT(nodes->transports[0]->stats().retransmits + nodes->transports[1]->stats().retransmits,
            0u);
  EXPECT_EQ(nodes->recorders[0].downs(1) + nodes->recorders[1].downs(0), 0);
}

TEST(DpdkTransportTest, AnIdleSleepDeliversEverythingAndLeavesTheCoreWhenQuiet) {
  RingPair pair;
  ASSERT_TRUE(pair.ok);
  for (auto& options : pair.options) options.idle_sleep = std::chrono::microseconds(1000);
  auto nodes = start_pair(pair);
  ASSERT_TRUE(nodes);
  exchange_every_size(*nodes);
  // A quiet half second (hellos only): a spinning thread would use about all of it.
  const double before = nodes->transports[0]->stats().poll_cpu_seconds;
  const auto quiet_from = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(milliseconds(500));  // the interval measured, not a wait for an event
  const double quiet =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - quiet_from).count();
  const double used = nodes->transports[0]->stats().poll_cpu_seconds - before;
  EXPECT_LT(used, 0.2 * quiet) << "polling CPU " << used << " s in " << quiet << " s";
}

TEST(DpdkTransportTest, RefusesWhatTcpRefuses) {
  RingPair pair;
  ASSERT_TRUE(pair.ok);
  DpdkTransport lonely(pair.options[0]);
  Recorder recorder;
  ASSERT_TRUE(lonely.start(recorder.handlers()).ok());
  EXPECT_EQ(lonely.send(1, numbered_message(0, 0)).code(), ErrorCode::kUnavailable);
  EXPECT_EQ(lonely.send(0, numbered_message(0, 0)).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(lonely.send(2, numbered_message(0, 0)).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(lonely.send(1, std::make_shared<MessageBytes>()).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(lonely.start(recorder.handlers()).code(), ErrorCode::kAborted);

  DpdkTransportOptions bad = pair.options[1];
  bad.peers[0].host = "gateway-0";
  EXPECT_EQ(DpdkTransport(bad).start(recorder.handlers()).code(), ErrorCode::kInvalidArgument);
}

TEST(DpdkTransportTest, ALostPeerIsReportedWithinThePeerTimeout) {
  RingPair pair;
  ASSERT_TRUE(pair.ok);
  auto nodes = start_pair(pair);
  ASSERT_TRUE(nodes);
  nodes->recorders[1].forbid_calls();
  nodes->transports[1]->stop();
  EXPECT_EQ(nodes->recorders[1].calls_after_forbid(), 0);
  const auto stopped = std::chrono::steady_clock::now();
  ASSERT_TRUE(
      eventually([&] { return nodes->recorders[0].downs(1) == 1; }, std::chrono::seconds(5)));
  EXPECT_LT(std::chrono::steady_clock::now() - stopped,
            pair.options[0].peer_timeout + std::chrono::milliseconds(500));
  EXPECT_FALSE(nodes->transports[0]->peer_up(1));
  // The report came once the transport itself told the change (the mailbox reads it there).
  EXPECT_EQ(nodes->recorders[0].liveness(1),
            (std::vector<Recorder::Liveness>{{true, 0}, {false, 1}}));
  EXPECT_EQ(nodes->transports[0]->send(1, numbered_message(0, 0)).code(), ErrorCode::kUnavailable);
  EXPECT_EQ(nodes->transports[0]->stats().disconnects, 1u);
}

// A gateway restarted at another address (a recreated pod's new virtual function): its peer
// reaches it once the membership lists it there, and a link moved while up goes down.
TEST(DpdkTransportTest, APeerListedAtANewAddressIsReachedThere) {
  RingPair pair;
  ASSERT_TRUE(pair.ok);
  const net::Endpoint moved{"10.0.0.3", 4792};
  pair.options[1].peers[1] = moved;  // rank 0 still lists rank 1 at 10.0.0.2
  Started nodes;
  for (int rank = 0; rank < 2; ++rank) {
    nodes.transports[rank] = std::make_unique<DpdkTransport>(pair.options[rank]);
    ASSERT_TRUE(nodes.transports[rank]->start(nodes.recorders[rank].handlers()).ok());
  }
  EXPECT_TRUE(nodes.transports[0]->dials(1));
  EXPECT_FALSE(nodes.transports[0]->dials(0));
  nodes.transports[0]->update_peers({{"", 0}, {"not-an-address", 1}});  // ignored
  nodes.transports[0]->update_peers({{"", 0}, moved});
  ASSERT_TRUE(
      eventually([&] { return nodes.recorders[0].ups(1) == 1 && nodes.recorders[1].ups(0) == 1; }));
  exchange_every_size(nodes);

  nodes.transports[0]->update_peers({{"", 0}, {"10.0.0.2", 4791}});
  EXPECT_TRUE(eventually([&] { return nodes.recorders[0].downs(1) == 1; }));
  EXPECT_FALSE(nodes.transports[0]->peer_up(1));
}

TEST(DpdkTransportTest, AMessageNotAcknowledgedByItsDeadlineTakesThePeerDown) {
  RingPair pair;
  ASSERT_TRUE(pair.ok);
  pair.options[0].message_deadline = milliseconds(300);
  auto nodes = start_pair(pair);
  ASSERT_TRUE(nodes);
  nodes->transports[1]->stop();
  const auto sent = std::chrono::steady_clock::now();
  ASSERT_TRUE(nodes->transports[0]->send(1, numbered_message(0, 0, 1u << 20)).ok());
  ASSERT_TRUE(
      eventually([&] { return nodes->recorders[0].downs(1) == 1; }, std::chrono::seconds(5)));
  EXPECT_LT(std::chrono::steady_clock::now() - sent, milliseconds(800));
}

TEST(DpdkTransportTest, ARejectedMessageResetsThePeerWhichComesBack) {
  RingPair pair;
  ASSERT_TRUE(pair.ok);
  auto nodes = start_pair(pair);
  ASSERT_TRUE(nodes);
  auto poison = std::make_shared<MessageBytes>(16, Recorder::kRejectMarker);
  ASSERT_TRUE(nodes->transports[0]->send(1, poison).ok());
  ASSERT_TRUE(eventually([&] { return nodes->recorders[1].ups(0) == 2; }));
  EXPECT_EQ(nodes->recorders[1].downs(0), 1);
  EXPECT_EQ(nodes->transports[1]->stats().rejected, 1u);
  // The sender sees the receiver's new session: down and at once up again.
  ASSERT_TRUE(eventually([&] { return nodes->recorders[0].ups(1) == 2; }));
  EXPECT_EQ(nodes->recorders[0].downs(1), 1);
  ASSERT_TRUE(
      eventually([&] { return nodes->transports[0]->send(1, numbered_message(0, 1)).ok(); }));
  EXPECT_TRUE(eventually([&] { return nodes->recorders[1].count_from(0) == 1; }));

  nodes->transports[0]->stop();
  EXPECT_FALSE(nodes->transports[0]->peer_up(1));
  EXPECT_EQ(nodes->transports[0]->send(1, numbered_message(0, 2)).code(), ErrorCode::kUnavailable);
}

}  // namespace
}  // namespace gradgate::gateway::testing
