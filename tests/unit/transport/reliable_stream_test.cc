// The whole reliability layer over a lossy link: 1,000 messages of mixed sizes (1 B to a few MB)
// go from rank 0 to rank 1 while rank 1 sends small messages back, through 0%, 1% and 5% loss
// each way with duplicated and reordered datagrams. Every message must arrive exactly once, in
// order and byte-identical; only loss may cause retransmissions.
#include <gtest/gtest.h>

#include "tests/unit/transport/lossy_link.h"

namespace gradgate::gateway::reliable::testing {
namespace {

constexpr int kMessages = 1000;
constexpr int kReplies = 100;

/// `size` bytes that depend on `number`.
Message patterned_message(int number, std::size_t size) {
  auto bytes = std::make_shared<MessageBytes>(size);
  uint64_t pattern = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(number + 1);
  for (std::size_t i = 0; i < size; ++i) {
    pattern ^= pattern << 13;
    pattern ^= pattern >> 7;
    pattern ^= pattern << 17;
    (*bytes)[i] = std::byte(pattern & 0xff);
  }
  return bytes;
}

/// Message `number`, of a size drawn from a mix: mostly small, some tens or hundreds of
/// kilobytes, a few megabytes (the first three: 1 B, 1 KB and 3 MB).
Message mixed_message(int number, Prng& prng) {
  std::size_t size = 0;
  const uint64_t kind = prng.below(100);
  if (number == 0) {
    size = 1;
  } else if (number == 1) {
    size = 1024;
  } else if (number == 2) {
    size = 3u << 20;
  } else if (kind < 40) {
    size = 1 + prng.below(200);
  } else if (kind < 70) {
    size = 1024;
  } else if (kind < 92) {
    size = 1024 + prng.below(64 * 1024);
  } else if (kind < 99) {
    size = 64 * 1024 + prng.below(256 * 1024);
  } else {
    size = (1u << 20) + prng.below(3u << 20);
  }
  return patterned_message(number, size);
}

/// Queues `messages[next...]` on `side` until its queue is full.
void queue_what_fits(Side& side, const std::vector<Message>& messages, std::size_t& next,
                     Clock::time_point now) {
  for (; next < messages.size(); ++next) {
    const Result<uint64_t> id = side.session.send(messages[next], now);
    if (!id.ok()) {
      ASSERT_EQ(id.status().code(), ErrorCode::kResourceExhausted) << id.status().to_string();
      return;
    }
    ASSERT_EQ(*id, next);
  }
}

void expect_delivered_in_order(const std::vector<ReceivedMessage>& received,
                               const std::vector<Message>& sent) {
  ASSERT_EQ(received.size(), sent.size());
  for (std::size_t i = 0; i < sent.size(); ++i) {
    ASSERT_EQ(received[i].id, i);
    ASSERT_TRUE(received[i].bytes == *sent[i]) << "message " << i << " differs";
  }
}

class ReliableStreamTest : public ::testing::TestWithParam<double> {};

TEST_P(ReliableStreamTest, EveryMessageArrivesOnceInOrderAndIntact) {
  const double loss = GetParam();
  Impairments impairments;
  impairments.drop = loss;
  impairments.duplicate = 0.01;
  impairments.reorder = 0.02;
  SessionPair pair(fast_link_config(), impairments, impairments, 42);

  Prng prng(7);
  std::vector<Message> to_b;
  std::size_t total_bytes = 0;
  for (int i = 0; i < kMessages; ++i) {
    to_b.push_back(mixed_message(i, prng));
    total_bytes += to_b.back()->size();
  }
  std::vector<Message> to_a;
  for (int i = 0; i < kReplies; ++i) to_a.push_back(patterned_message(kMessages + i, 1000));

  std::size_t next_to_b = 0;
  std::size_t next_to_a = 0;
  const bool done = pair.run_until(
      [&] {
        queue_what_fits(pair.a, to_b, next_to_b, pair.now);
        queue_what_fits(pair.b, to_a, next_to_a, pair.now);
        return pair.b.received.size() == to_b.size() && pair.a.received.size() == to_a.size();
      },
      2'000'000);
  ASSERT_TRUE(done) << "b has " << pair.b.received.size() << ", a has " << pair.a.received.size()
                    << "; a: " << pair.a.session.status().to_string()
                    << "; b: " << pair.b.session.status().to_string();
  // Whatever is still in the network (duplicates, late retransmissions) delivers nothing new.
  pair.run_for(milliseconds(500), 100'000);

  EXPECT_TRUE(pair.a.errors.empty()) << pair.a.errors.front().to_string();
  EXPECT_TRUE(pair.b.errors.empty()) << pair.b.errors.front().to_string();
  expect_delivered_in_order(pair.b.received, to_b);
  expect_delivered_in_order(pair.a.received, to_a);
  EXPECT_GT(total_bytes, 20u << 20);

  const SenderCounters sent = pair.a.session.sender().counters();
  const uint64_t retransmits = sent.retransmits_timeout + sent.retransmits_fast;
  EXPECT_EQ(sent.messages_acknowledged, to_b.size());
  EXPECT_EQ(sent.queued_bytes, 0u);
  EXPECT_EQ(sent.in_flight, 0u);
  EXPECT_EQ(pair.b.session.receiver().counters().messages_delivered, to_b.size());
  EXPECT_GT(pair.b.session.receiver().counters().duplicates, 0u);
  EXPECT_GT(pair.a_to_b().counters().reordered, 0u);
  if (loss == 0.0) {
    EXPECT_EQ(retransmits, 0u) << "no loss, no retransmission (reordering is not a loss)";
    EXPECT_EQ(pair.a_to_b().counters().dropped, 0u);
  } else {
    EXPECT_GT(pair.a_to_b().counters().dropped, 0u);
    EXPECT_GT(retransmits, 0u);
    EXPECT_GT(sent.retransmits_fast, 0u) << "SACKs must find most losses before the RTO";
  }
  EXPECT_TRUE(pair.a.session.status().ok()) << pair.a.session.status().to_string();
  EXPECT_TRUE(pair.b.session.status().ok()) << pair.b.session.status().to_string();
}

INSTANTIATE_TEST_SUITE_P(Loss, ReliableStreamTest, ::testing::Values(0.0, 0.01, 0.05),
                         [](const ::testing::TestParamInfo<double>& loss) {
                           return "Loss" + std::to_string(static_cast<int>(loss.param * 100)) +
                                  "Percent";
                         });

}  // namespace
}  // namespace gradgate::gateway::reliable::testing
