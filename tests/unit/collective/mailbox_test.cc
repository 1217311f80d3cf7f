#include "gateway/collective/mailbox.h"

#include <gtest/gtest.h>

#include <thread>

namespace gradgate::gateway {
namespace {

MessageBytes message(MessageKind kind, uint32_t tensor, uint64_t seq, size_t payload = 4) {
  return make_message({kind, 0, tensor, 0, seq}, std::vector<std::byte>(payload, std::byte{1}));
}

Clock::time_point soon() { return Clock::now() + std::chrono::milliseconds(50); }

TEST(Mailbox, FilesAndTakesByKey) {
  Mailbox mailbox(2, 1 << 20, std::chrono::seconds(60));
  ASSERT_TRUE(mailbox.deliver(1, message(MessageKind::kGather, 5, 3)).ok());
  EXPECT_EQ(mailbox.take({5, 3, MessageKind::kGather, 0, 0, 0}, soon(), 0, {0}).status().code(),
            ErrorCode::kTimeout);  // wrong sender
  auto mail = mailbox.take({5, 3, MessageKind::kGather, 0, 0, 1}, soon(), 0, {0});
  ASSERT_TRUE(mail.ok());
  EXPECT_EQ(mail->payload().size(), 4u);
  EXPECT_EQ(mailbox.stats().stored_bytes, 0u);
}

TEST(Mailbox, RefusesMalformedDuplicateAndOverCap) {
  // Each message costs its bytes and a fixed overhead: the first (44 bytes) fits, a second of
  // 140 bytes would not.
  Mailbox mailbox(2, 400, std::chrono::seconds(60));
  EXPECT_EQ(mailbox.deliver(1, MessageBytes(10)).code(), ErrorCode::kMalformedFrame);
  EXPECT_EQ(mailbox.deliver(7, message(MessageKind::kGather, 1, 0)).code(),
            ErrorCode::kMalformedFrame);
  ASSERT_TRUE(mailbox.deliver(1, message(MessageKind::kGather, 1, 0)).ok());
  EXPECT_EQ(mailbox.deliver(1, message(MessageKind::kGather, 1, 0)).code(),
            ErrorCode::kMalformedFrame);
  EXPECT_EQ(mailbox.deliver(1, message(MessageKind::kGather, 1, 1, 100)).code(),
            ErrorCode::kResourceExhausted);
  EXPECT_EQ(mailbox.stats().refused, 4u);
  // A flood of empty messages is bounded by the overhead alone.
  Mailbox small(2, 1000, std::chrono::seconds(60));
  int filed = 0;
  for (uint64_t seq = 0; seq < 100; ++seq) {
    filed += small.deliver(1, message(MessageKind::kGather, 1, seq, 0)).ok() ? 1 : 0;
  }
  EXPECT_EQ(filed, 5);  // 1000 / (40 + 128)
}

// A message over the cap fails its operation (with the setting to raise) rather than the link:
// other operations' messages are still filed.
TEST(Mailbox, AMessageOverTheCapFailsItsOperationOnly) {
  Mailbox mailbox(2, 400, std::chrono::seconds(60));
  EXPECT_EQ(mailbox.deliver(1, message(MessageKind::kGather, 1, 0, 300)).code(),
            ErrorCode::kResourceExhausted);
  const auto failed = mailbox.take({1, 0, MessageKind::kGather, 0, 0, 1},
                                   Clock::now() + std::chrono::seconds(30), 0, {0});
  EXPECT_EQ(failed.status().code(), ErrorCode::kResourceExhausted);
  EXPECT_NE(failed.status().message().find("raise transport.send_queue_bytes"), std::string::npos)
      << failed.status().to_string();
  ASSERT_TRUE(mailbox.deliver(1, message(MessageKind::kGather, 2, 0)).ok());
  EXPECT_TRUE(mailbox.take({2, 0, MessageKind::kGather, 0, 0, 1}, soon(), 0, {0}).ok());
}

TEST(Mailbox, DropsMessagesOfFinishedOperations) {
  Mailbox mailbox(2, 1 << 20, std::chrono::seconds(60));
  ASSERT_TRUE(mailbox.deliver(1, message(MessageKind::kGather, 1, 4)).ok());
  mailbox.finish(1, 4);
  EXPECT_EQ(mailbox.stats().stored_bytes, 0u);
  ASSERT_TRUE(mailbox.deliver(1, message(MessageKind::kGather, 1, 2)).ok());
  EXPECT_EQ(mailbox.stats().late, 1u);
  EXPECT_EQ(mailbox.stats().stored_bytes, 0u);
  mailbox.forget_tensor(1);  // a new run of the job starts again at seq 0
  ASSERT_TRUE(mailbox.deliver(1, message(MessageKind::kGather, 1, 0)).ok());
  EXPECT_GT(mailbox.stats().stored_bytes, 0u);
}

TEST(Mailbox, AbortEndsTheWaitWithTheReason) {
  Mailbox mailbox(2, 1 << 20, std::chrono::seconds(60));
  std::thread aborter([&] {
    const std::string reason = "bad gradient";
    (void)mailbox.deliver(1, make_message({MessageKind::kAbort, 0, 3, 0, 8},
                                          std::as_bytes(std::span(reason.data(), reason.size()))));
  });
  auto mail = mailbox.take({3, 8, MessageKind::kGather, 0, 0, 1},
                           Clock::now() + std::chrono::seconds(30), 0, {0});
  aborter.join();
  EXPECT_EQ(mail.status().code(), ErrorCode::kAborted);
  EXPECT_NE(mail.status().message().find("bad gradient"), std::string::npos);
}

// An abort whose phase is kNonFiniteGradient skips the step; of a skip and a failure of the same
// step, in either order, the failure wins, so that every gateway fails it.
TEST(Mailbox, AnAbortForANonFiniteGradientSkipsTheStepUnlessAnotherFailed) {
  const auto abort = [](uint32_t tensor, ErrorCode code) {
    return make_message({MessageKind::kAbort, 0, tensor, static_cast<uint32_t>(code), 8}, {});
  };
  const auto taken = [](Mailbox& mailbox, uint32_t tensor) {
    return mailbox.take({tensor, 8, MessageKind::kGather, 0, 0, 1}, soon(), 0, {0}).status().code();
  };
  Mailbox mailbox(3, 1 << 20, std::chrono::seconds(60));
  EXPECT_FALSE(mailbox.peer_abort(1, 8).has_value());
  ASSERT_TRUE(mailbox.deliver(1, abort(1, ErrorCode::kNonFiniteGradient)).ok());
  EXPECT_EQ(taken(mailbox, 1), ErrorCode::kNonFiniteGradient);
  EXPECT_EQ(mailbox.peer_abort(1, 8)->code(), ErrorCode::kNonFiniteGradient);
  ASSERT_TRUE(mailbox.deliver(2, abort(1, ErrorCode::kTimeout)).ok());
  EXPECT_EQ(taken(mailbox, 1), ErrorCode::kAborted);
  ASSERT_TRUE(mailbox.deliver(1, abort(2, ErrorCode::kTimeout)).ok());
  ASSERT_TRUE(mailbox.deliver(2, abort(2, ErrorCode::kNonFiniteGradient)).ok());
  EXPECT_EQ(taken(mailbox, 2), ErrorCode::kAborted);
  EXPECT_NE(mailbox.peer_abort(2, 8)->message().find("gateway 1"), std::string::npos);
}

TEST(Mailbox, AMessageUnderAnotherPolicyVersionEndsTheWaitAtOnce) {
  Mailbox mailbox(2, 1 << 20, std::chrono::seconds(60));
  // Gateway 1 runs tensor 3 step 8 under policy version 2 (a ring message); this gateway waits
  // for a gather message of it under version 1: they will never match.
  ASSERT_TRUE(
      mailbox.deliver(1, make_message({MessageKind::kRingReduce, 0, 3, 0, 8, {2}}, {})).ok());
  const auto start = Clock::now();
  auto mail =
      mailbox.take({3, 8, MessageKind::kGather, 0, 0, 1}, start + std::chrono::seconds(30), 0, {1});
  EXPECT_EQ(mail.status().code(), ErrorCode::kIncompatible);
  EXPECT_NE(mail.status().message().find("policy version 2"), std::string::npos)
      << mail.status().to_string();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  // The same operation under the same version is taken as usual.
  ASSERT_TRUE(mailbox.deliver(1, make_message({MessageKind::kGather, 0, 4, 0, 8, {1}}, {})).ok());
  EXPECT_TRUE(mailbox.take({4, 8, MessageKind::kGather, 0, 0, 1}, soon(), 0, {1}).ok());
}

TEST(Mailbox, LostSenderAndShutdownEndTheWait) {
  Mailbox mailbox(2, 1 << 20, std::chrono::seconds(60));
  mailbox.set_peer_up(1, true);
  const uint64_t before = mailbox.down_count(1);
  std::thread dropper([&] { mailbox.set_peer_up(1, false); });
  auto mail = mailbox.take({3, 8, MessageKind::kGather, 0, 0, 1},
                           Clock::now() + std::chrono::seconds(30), before, {0});
  dropper.join();
  EXPECT_EQ(mail.status().code(), ErrorCode::kUnavailable);

  std::thread stopper([&] { mailbox.shutdown(); });
  EXPECT_EQ(mailbox.wait_peer_up(1, Clock::now() + std::chrono::seconds(30)).code(),
            ErrorCode::kAborted);
  stopper.join();
}

// A send to a peer that is not connected waits for it, but not for a peer lost during the step
// nor for an operation another peer aborted: those end the wait at once, as they end take().
TEST(Mailbox, ASendWaitEndsWithTheStepNotAtTheDeadline) {
  Mailbox mailbox(3, 1 << 20, std::chrono::seconds(60));
  const auto later = Clock::now() + std::chrono::seconds(30);
  mailbox.set_peer_up(1, true);
  mailbox.set_peer_up(2, true);
  EXPECT_TRUE(mailbox.wait_to_send(1, 3, 8, mailbox.down_count(1), later).ok());

  // Peer 2 goes down after the operation started (its count was read before).
  const uint64_t before = mailbox.down_count(2);
  mailbox.set_peer_up(2, false);
  EXPECT_EQ(mailbox.wait_to_send(2, 3, 8, before, later).code(), ErrorCode::kUnavailable);

  // Peer 2 is down since before the operation (its count is current): only peer 1's abort of
  // the operation ends the wait.
  std::thread aborter([&] {
    (void)mailbox.deliver(1, make_message({MessageKind::kAbort, 0, 3, 0, 8}, {}));
  });
  const auto start = Clock::now();
  EXPECT_EQ(mailbox.wait_to_send(2, 3, 8, mailbox.down_count(2), later).code(),
            ErrorCode::kAborted);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
  aborter.join();
}

TEST(Mailbox, KnowsTheNewestPolicyAPeerRanATensorUnder) {
  Mailbox mailbox(2, 1 << 20, std::chrono::seconds(60));
  const auto under = [](uint32_t version, uint64_t seq) {
    return make_message({MessageKind::kGather, 0, 5, 0, seq, {version}}, {});
  };
  ASSERT_TRUE(mailbox.deliver(1, under(3, 0)).ok());
  EXPECT_EQ(mailbox.newest_peer_policy(5), 0u);  // before the tensor's first finished operation
  mailbox.finish(5, 0);
  ASSERT_TRUE(mailbox.deliver(1, under(4, 1)).ok());
  ASSERT_TRUE(mailbox.deliver(1, make_message({MessageKind::kAbort, 0, 5, 0, 1, {6}}, {})).ok());
  ASSERT_TRUE(mailbox.deliver(1, under(2, 2)).ok());
  ASSERT_TRUE(mailbox.deliver(1, under(9, 0)).ok());  // late: of a finished operation
  EXPECT_EQ(mailbox.newest_peer_policy(5), 6u);
  EXPECT_EQ(mailbox.newest_peer_policy(9), 0u);
  mailbox.forget_tensor(5);
  EXPECT_EQ(mailbox.newest_peer_policy(5), 0u);
}

TEST(Envelope, CarriesThePolicyVersionsItsSendersHold) {
  Envelope envelope{MessageKind::kGather, 1, 2, 3, 4, {5}};
  envelope.stamp.held = {7, 9};
  auto parsed = parse_envelope(make_message(envelope, {}));
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->stamp.version, 5u);
  EXPECT_EQ(parsed->stamp.held, (HeldPolicies{7, 9}));
  EXPECT_EQ(parsed->stamp.held.common_with({8, 12}), (HeldPolicies{8, 9}));
  EXPECT_EQ(parsed->stamp.held.common_with({0, 0}), (HeldPolicies{7, 0}));  // none in common
}

TEST(Envelope, RejectsWhatIsNotAnEnvelope) {
  auto good = make_message({MessageKind::kScale, 2, 3, 4, 5}, {});
  auto parsed = parse_envelope(good);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->chunk, 2);
  EXPECT_EQ(parsed->seq, 5u);
  for (size_t byte : {0, 4, 5}) {
    auto bad = good;
    bad[byte] = std::byte{0xEE};
    EXPECT_EQ(parse_envelope(bad).status().code(), ErrorCode::kMalformedFrame) << byte;
  }
  EXPECT_FALSE(parse_envelope(std::span(good).first(10)).ok());
}

}  // namespace
}  // namespace gradgate::gateway
