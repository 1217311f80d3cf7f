#include "gateway/collective/pending_aborts.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace gradgate::gateway {
namespace {

using std::chrono::milliseconds;

Message numbered(size_t n) { return std::make_shared<const MessageBytes>(n, std::byte{1}); }

std::vector<size_t> sizes(const std::vector<Message>& messages) {
  std::vector<size_t> out;
  for (const Message& message : messages) out.push_back(message->size());
  return out;
}

const auto kStart = PendingAborts::Clock::time_point{} + std::chrono::hours(1);

TEST(PendingAborts, GivesEachPeerItsMessagesOnceInOrder) {
  PendingAborts pending(3, milliseconds(1000));
  pending.hold(1, numbered(1), kStart);
  pending.hold(2, numbered(2), kStart);
  pending.hold(1, numbered(3), kStart);
  EXPECT_EQ(sizes(pending.take(1, kStart)), (std::vector<size_t>{1, 3}));
  EXPECT_TRUE(pending.take(1, kStart).empty());
  EXPECT_EQ(sizes(pending.take(2, kStart)), (std::vector<size_t>{2}));
  EXPECT_TRUE(pending.take(0, kStart).empty());
}

TEST(PendingAborts, DropsMessagesOlderThanTheTimeout) {
  PendingAborts pending(2, milliseconds(1000));
  pending.hold(1, numbered(1), kStart);
  pending.hold(1, numbered(2), kStart + milliseconds(600));
  EXPECT_EQ(sizes(pending.take(1, kStart + milliseconds(1000))), (std::vector<size_t>{2}));
  pending.hold(1, numbered(3), kStart);
  pending.hold(1, numbered(4), kStart + milliseconds(1500));  // the expired one goes on hold
  EXPECT_EQ(sizes(pending.take(1, kStart + milliseconds(1500))), (std::vector<size_t>{4}));
}

TEST(PendingAborts, KeepsTheNewestUpToItsCapAndIgnoresUnknownRanks) {
  PendingAborts pending(2, milliseconds(1000));
  for (size_t n = 1; n <= PendingAborts::kMaxPerPeer + 10; ++n)
    pending.hold(1, numbered(n), kStart);
  pending.hold(2, numbered(1), kStart);
  const auto kept = sizes(pending.take(1, kStart));
  ASSERT_EQ(kept.size(), PendingAborts::kMaxPerPeer);
  EXPECT_EQ(kept.front(), 11u);
  EXPECT_EQ(kept.back(), PendingAborts::kMaxPerPeer + 10);
  EXPECT_TRUE(pending.take(2, kStart).empty());
}

}  // namespace
}  // namespace gradgate::gateway
