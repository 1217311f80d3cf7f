#include "gateway/collective/recent_aborts.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace gradgate::gateway {
namespace {

using std::chrono::milliseconds;

// A message told apart by its size.
Message sized(size_t n) { return std::make_shared<const MessageBytes>(n, std::byte{1}); }

std::vector<size_t> sizes(const std::vector<Message>& messages) {
  std::vector<size_t> out;
  for (const Message& message : messages) out.push_back(message->size());
  return out;
}

const auto kStart = RecentAborts::Clock::time_point{} + std::chrono::hours(1);

TEST(RecentAborts, GivesEachPeerItsMessagesInOrderAsOftenAsAsked) {
  RecentAborts recent(3, milliseconds(1000));
  recent.keep(1, sized(1), kStart);
  recent.keep(2, sized(2), kStart);
  recent.keep(1, sized(3), kStart);
  EXPECT_EQ(sizes(recent.kept(1, kStart)), (std::vector<size_t>{1, 3}));
  EXPECT_EQ(sizes(recent.kept(1, kStart + milliseconds(999))), (std::vector<size_t>{1, 3}));
  EXPECT_EQ(sizes(recent.kept(2, kStart)), (std::vector<size_t>{2}));
  EXPECT_TRUE(recent.kept(0, kStart).empty());
}

TEST(RecentAborts, DropsMessagesOlderThanTheTimeout) {
  RecentAborts recent(2, milliseconds(1000));
  recent.keep(1, sized(1), kStart);
  recent.keep(1, sized(2), kStart + milliseconds(600));
  EXPECT_EQ(sizes(recent.kept(1, kStart + milliseconds(1000))), (std::vector<size_t>{2}));
  EXPECT_TRUE(recent.kept(1, kStart + milliseconds(1600)).empty());
}

TEST(RecentAborts, KeepsTheNewestUpToItsCapAndIgnoresUnknownRanks) {
  RecentAborts recent(2, milliseconds(1000));
  for (size_t n = 1; n <= RecentAborts::kMaxPerPeer + 10; ++n) recent.keep(1, sized(n), kStart);
  recent.keep(2, sized(1), kStart);
  const auto kept = sizes(recent.kept(1, kStart));
  ASSERT_EQ(kept.size(), RecentAborts::kMaxPerPeer);
  EXPECT_EQ(kept.front(), 11u);
  EXPECT_EQ(kept.back(), RecentAborts::kMaxPerPeer + 10);
  EXPECT_TRUE(recent.kept(2, kStart).empty());
}

}  // namespace
}  // namespace gradgate::gateway
