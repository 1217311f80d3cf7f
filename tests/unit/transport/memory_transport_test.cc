#include "gateway/transport/memory/memory_transport.h"

#include <gtest/gtest.h>

#include <mutex>
#include <vector>

#include "transport_test_support.h"

namespace gradgate::gateway {
namespace {

using testing::eventually;
using testing::numbered_message;
using testing::Recorder;
using testing::sequence_of;

TEST(MemoryTransport, PeersComeUpAndMessagesArriveInOrder) {
  MemoryFabric fabric(3);
  Recorder seen_a, seen_b;  // handlers outlive their transports
  MemoryTransport a(fabric, 0), b(fabric, 1);
  ASSERT_TRUE(a.start(seen_a.handlers()).ok());
  EXPECT_EQ(a.send(1, numbered_message(0, 0)).code(), ErrorCode::kUnavailable);  // not started
  ASSERT_TRUE(b.start(seen_b.handlers()).ok());
  ASSERT_TRUE(eventually([&] { return seen_a.ups(1) == 1 && seen_b.ups(0) == 1; }));
  EXPECT_EQ(seen_a.peer_events(1), std::vector<bool>{true});
  EXPECT_EQ(seen_b.peer_events(0), std::vector<bool>{true});
  EXPECT_TRUE(a.peer_up(1));
  EXPECT_FALSE(a.peer_up(2));
  for (uint32_t i = 0; i < 100; ++i) ASSERT_TRUE(a.send(1, numbered_message(0, i)).ok());
  ASSERT_TRUE(eventually([&] { return seen_b.count_from(0) == 100; }));
  const auto messages = seen_b.messages_from(0);
  for (uint32_t i = 0; i < 100; ++i) EXPECT_EQ(sequence_of(messages[i]), i);
  EXPECT_EQ(a.stats().messages_sent, 100u);
  EXPECT_EQ(b.stats().messages_received, 100u);
  EXPECT_EQ(b.stats().peers_up, 1u);
}

TEST(MemoryTransport, BadRanksAreRefused) {
  MemoryFabric fabric(2);
  Recorder seen, unused;
  MemoryTransport a(fabric, 0), twin(fabric, 0), outside(fabric, 5);
  ASSERT_TRUE(a.start(seen.handlers()).ok());
  EXPECT_EQ(a.send(0, numbered_message(0, 0)).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(a.send(7, numbered_message(0, 0)).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(twin.start(unused.handlers()).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(outside.start(unused.handlers()).code(), ErrorCode::kInvalidArgument);
}

TEST(MemoryTransport, AFullQueueRefusesAtOnce) {
  MemoryFabric fabric(2, /*queue_cap_bytes=*/16);
  // b's handler blocks until released: its queue fills.
  std::mutex gate;
  std::unique_lock hold(gate);
  Recorder seen_a;
  Transport::Handlers blocking;
  blocking.on_message = [&](uint32_t, MessageBytes&&) {
    std::lock_guard wait(gate);
    return true;
  };
  blocking.on_peer = [](uint32_t, bool) {};
  MemoryTransport a(fabric, 0), b(fabric, 1);
  ASSERT_TRUE(a.start(seen_a.handlers()).ok());
  ASSERT_TRUE(b.start(blocking).ok());
  ASSERT_TRUE(eventually([&] { return seen_a.ups(1) == 1; }));
  Status refused;
  // The first message may be in b's handler already; then 16 bytes wait and the next is refused.
  for (uint32_t i = 0; i < 4 && refused.ok(); ++i) refused = a.send(1, numbered_message(0, i, 8));
  EXPECT_EQ(refused.code(), ErrorCode::kResourceExhausted) << refused.to_string();
  hold.unlock();
  b.stop();
}

TEST(MemoryTransport, ARefusedMessageResetsTheLink) {
  MemoryFabric fabric(2);
  Recorder seen_a, seen_b;  // seen_b refuses messages that start with its reject marker
  MemoryTransport a(fabric, 0), b(fabric, 1);
  seen_a.watch(a);
  ASSERT_TRUE(a.start(seen_a.handlers()).ok());
  ASSERT_TRUE(b.start(seen_b.handlers()).ok());
  auto garbage = std::make_shared<MessageBytes>(8);
  (*garbage)[0] = Recorder::kRejectMarker;
  ASSERT_TRUE(a.send(1, garbage).ok());
  ASSERT_TRUE(eventually([&] { return seen_a.ups(1) == 2 && seen_b.ups(0) == 2; }));
  EXPECT_EQ(seen_a.peer_events(1), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(seen_b.peer_events(0), (std::vector<bool>{true, false, true}));
  // Each report came once the transport itself told the change (the mailbox reads it there).
  EXPECT_EQ(seen_a.liveness(1),
            (std::vector<Recorder::Liveness>{{true, 0}, {false, 1}, {true, 1}}));
  EXPECT_EQ(a.peer_down_count(1), 1u);
  EXPECT_EQ(b.stats().rejected, 1u);
}

TEST(MemoryTransport, AStoppedPeerIsDownAndItsHandlersRunNoMore) {
  MemoryFabric fabric(2);
  Recorder seen_a, seen_b;
  MemoryTransport a(fabric, 0);
  {
    MemoryTransport b(fabric, 1);
    ASSERT_TRUE(a.start(seen_a.handlers()).ok());
    ASSERT_TRUE(b.start(seen_b.handlers()).ok());
    ASSERT_TRUE(eventually([&] { return seen_b.ups(0) == 1; }));
    b.stop();
    b.stop();  // idempotent
    seen_b.forbid_calls();
    EXPECT_EQ(a.send(1, numbered_message(0, 0)).code(), ErrorCode::kUnavailable);
  }
  ASSERT_TRUE(eventually([&] { return seen_a.downs(1) == 1; }));
  EXPECT_EQ(seen_a.peer_events(1), (std::vector<bool>{true, false}));
  EXPECT_FALSE(a.peer_up(1));
  EXPECT_EQ(seen_b.count_from(0), 0u);
  EXPECT_EQ(seen_b.calls_after_forbid(), 0);
}

}  // namespace
}  // namespace gradgate::gateway
