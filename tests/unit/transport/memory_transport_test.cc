#include "gateway/transport/memory/memory_transport.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace gradgate::gateway {
namespace {

using std::chrono::seconds;

// What one transport's handlers saw, with a bounded wait for it.
class Seen {
 public:
  explicit Seen(bool accept = true) : accept_(accept) {}

  Transport::Handlers handlers() {
    Transport::Handlers handlers;
    handlers.on_message = [this](uint32_t from, MessageBytes&& message) {
      std::lock_guard lock(mutex_);
      messages_.push_back(
          std::to_string(from) + ":" +
          std::string(reinterpret_cast<const char*>(message.data()), message.size()));
      changed_.notify_all();
      return accept_;
    };
    handlers.on_peer = [this](uint32_t rank, bool up) {
      std::lock_guard lock(mutex_);
      peers_.push_back(std::to_string(rank) + (up ? " up" : " down"));
      changed_.notify_all();
    };
    return handlers;
  }

  bool wait_messages(size_t count) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, seconds(10), [&] { return messages_.size() >= count; });
  }
  bool wait_peers(size_t count) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, seconds(10), [&] { return peers_.size() >= count; });
  }
  std::vector<std::string> messages() {
    std::lock_guard lock(mutex_);
    return messages_;
  }
  std::vector<std::string> peers() {
    std::lock_guard lock(mutex_);
    return peers_;
  }

 private:
  const bool accept_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::string> messages_, peers_;
};

Message text(const std::string& value) {
  auto bytes = std::make_shared<MessageBytes>(value.size());
  std::memcpy(bytes->data(), value.data(), value.size());
  return bytes;
}

TEST(MemoryTransport, PeersComeUpAndMessagesArriveInOrder) {
  MemoryFabric fabric(3);
  Seen seen_a, seen_b;  // handlers outlive their transports
  MemoryTransport a(fabric, 0), b(fabric, 1);
  ASSERT_TRUE(a.start(seen_a.handlers()).ok());
  EXPECT_EQ(a.send(1, text("x")).code(), ErrorCode::kUnavailable);  // not started yet
  ASSERT_TRUE(b.start(seen_b.handlers()).ok());
  ASSERT_TRUE(seen_a.wait_peers(1));
  ASSERT_TRUE(seen_b.wait_peers(1));
  EXPECT_EQ(seen_a.peers(), std::vector<std::string>{"1 up"});
  EXPECT_EQ(seen_b.peers(), std::vector<std::string>{"0 up"});
  EXPECT_TRUE(a.peer_up(1));
  EXPECT_FALSE(a.peer_up(2));
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(a.send(1, text(std::to_string(i))).ok());
  ASSERT_TRUE(seen_b.wait_messages(100));
  const auto messages = seen_b.messages();
  for (int i = 0; i < 100; ++i) EXPECT_EQ(messages[i], "0:" + std::to_string(i));
  EXPECT_EQ(a.stats().messages_sent, 100u);
  EXPECT_EQ(b.stats().messages_received, 100u);
  EXPECT_EQ(b.stats().peers_up, 1u);
}

TEST(MemoryTransport, BadRanksAreRefused) {
  MemoryFabric fabric(2);
  Seen seen, unused;
  MemoryTransport a(fabric, 0), twin(fabric, 0), outside(fabric, 5);
  ASSERT_TRUE(a.start(seen.handlers()).ok());
  EXPECT_EQ(a.send(0, text("self")).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(a.send(7, text("none")).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(twin.start(unused.handlers()).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(outside.start(unused.handlers()).code(), ErrorCode::kInvalidArgument);
}

TEST(MemoryTransport, AFullQueueRefusesAtOnce) {
  MemoryFabric fabric(2, /*queue_cap_bytes=*/8);
  // b's handler blocks until released: its queue fills.
  std::mutex gate;
  std::unique_lock hold(gate);
  Seen seen_a;
  Transport::Handlers blocking;
  blocking.on_message = [&](uint32_t, MessageBytes&&) {
    std::lock_guard wait(gate);
    return true;
  };
  blocking.on_peer = [](uint32_t, bool) {};
  MemoryTransport a(fabric, 0), b(fabric, 1);
  ASSERT_TRUE(a.start(seen_a.handlers()).ok());
  ASSERT_TRUE(b.start(blocking).ok());
  ASSERT_TRUE(seen_a.wait_peers(1));
  Status refused;
  // The first message may be in b's handler already; then 8 bytes wait and the next is refused.
  for (int i = 0; i < 4 && refused.ok(); ++i) refused = a.send(1, text("1234"));
  EXPECT_EQ(refused.code(), ErrorCode::kResourceExhausted) << refused.to_string();
  hold.unlock();
  b.stop();
}

TEST(MemoryTransport, ARefusedMessageResetsTheLink) {
  MemoryFabric fabric(2);
  Seen seen_a, seen_b(/*accept=*/false);
  MemoryTransport a(fabric, 0), b(fabric, 1);
  ASSERT_TRUE(a.start(seen_a.handlers()).ok());
  ASSERT_TRUE(b.start(seen_b.handlers()).ok());
  ASSERT_TRUE(a.send(1, text("garbage")).ok());
  ASSERT_TRUE(seen_a.wait_peers(3));
  ASSERT_TRUE(seen_b.wait_peers(3));
  EXPECT_EQ(seen_a.peers(), (std::vector<std::string>{"1 up", "1 down", "1 up"}));
  EXPECT_EQ(seen_b.peers(), (std::vector<std::string>{"0 up", "0 down", "0 up"}));
  EXPECT_EQ(b.stats().rejected, 1u);
}

TEST(MemoryTransport, AStoppedPeerIsDownAndItsHandlersRunNoMore) {
  MemoryFabric fabric(2);
  Seen seen_a, seen_b;
  MemoryTransport a(fabric, 0);
  {
    MemoryTransport b(fabric, 1);
    ASSERT_TRUE(a.start(seen_a.handlers()).ok());
    ASSERT_TRUE(b.start(seen_b.handlers()).ok());
    ASSERT_TRUE(seen_b.wait_peers(1));
    b.stop();
    b.stop();  // idempotent
    EXPECT_EQ(a.send(1, text("late")).code(), ErrorCode::kUnavailable);
  }
  ASSERT_TRUE(seen_a.wait_peers(2));
  EXPECT_EQ(seen_a.peers(), (std::vector<std::string>{"1 up", "1 down"}));
  EXPECT_FALSE(a.peer_up(1));
  EXPECT_TRUE(seen_b.messages().empty());
}

}  // namespace
}  // namespace gradgate::gateway
