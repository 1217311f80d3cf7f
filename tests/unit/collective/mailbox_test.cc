#include "gateway/collective/mailbox.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "gateway/transport/memory/memory_transport.h"

namespace gradgate::gateway {
namespace {

// A mailbox of rank 0 whose peers are memory transports of one fabric: rank 0's transport keeps
// their liveness, and none is up until connect().
class MailboxOnFabric {
 public:
  explicit MailboxOnFabric(uint32_t nodes, uint64_t cap_bytes = 1 << 20) : fabric_(nodes) {
    for (uint32_t rank = 0; rank < nodes; ++rank) {
      transports_.push_back(std::make_unique<MemoryTransport>(fabric_, rank));
    }
    mailbox_ =
        std::make_unique<Mailbox>(nodes, *transports_[0], cap_bytes, std::chrono::seconds(60));
  }
  // The transports stop before the mailbox that rank 0's handler calls goes.
  ~MailboxOnFabric() {
    for (auto& transport : transports_) transport->stop();
  }

  Mailbox& mailbox() { return *mailbox_; }

  /// Starts every transport (rank 0's tells the mailbox of each change); true once all are up.
  bool connect() {
    const auto accept = [](uint32_t, MessageBytes&&) { return true; };
    const bool started = transports_[0]
                             ->start({accept,
                                      [this](uint32_t, bool) {
                                        mailbox_->peer_changed();
                                        std::lock_guard lock(mutex_);
                                        changed_.notify_all();
                                      }})
                             .ok();
    for (size_t rank = 1; rank < transports_.size(); ++rank) {
      if (!transports_[rank]->start({accept, [](uint32_t, bool) {}}).ok()) return false;
    }
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    for (uint32_t rank = 1; rank < transports_.size(); ++rank) {
      if (!mailbox_->wait_peer_up(rank, deadline).ok()) return false;
    }
    return started;
  }

  /// Stops peer `rank` and waits until rank 0's transport counts it down (bounded).
  bool drop(uint32_t rank) {
    const uint64_t before = transports_[0]->peer_down_count(rank);
    transports_[rank]->stop();
    std::unique_lock lock(mutex_);
    // The count changes before rank 0's handler runs, and the handler notifies under the lock.
    return changed_.wait_for(lock, std::chrono::seconds(10),
                             [&] { return transports_[0]->peer_down_count(rank) > before; });
  }

  /// Stops peer `rank` without waiting.
  void stop(uint32_t rank) { transports_[rank]->stop(); }

 private:
  MemoryFabric fabric_;
  std::vector<std::unique_ptr<MemoryTransport>> transports_;
  std::unique_ptr<Mailbox> mailbox_;
  std::mutex mutex_;
  std::condition_variable changed_;
};

MessageBytes message(MessageKind kind, uint32_t tensor, uint64_t seq, size_t payload = 4) {
  return make_message({kind, 0, tensor, 0, seq}, std::vector<std::byte>(payload, std::byte{1}));
}

Clock::time_point soon() { return Clock::now() + std::chrono::milliseconds(50); }

TEST(Mailbox, FilesAndTakesByKey) {
  MailboxOnFabric peers(2);
  Mailbox& mailbox = peers.mailbox();
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
  MailboxOnFabric peers(2, 400);
  Mailbox& mailbox = peers.mailbox();
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
  MailboxOnFabric small_peers(2, 1000);
  Mailbox& small = small_peers.mailbox();
  int filed = 0;
  for (uint64_t seq = 0; seq < 100; ++seq) {
    filed += small.deliver(1, message(MessageKind::kGather, 1, seq, 0)).ok() ? 1 : 0;
  }
  EXPECT_EQ(filed, 5);  // 1000 / (40 + 128)
}

// A message over the cap fails its operation (with the setting to raise) rather than the link:
// other operations' messages are still filed.
TEST(Mailbox, AMessageOverTheCapFailsItsOperationOnly) {
  MailboxOnFabric peers(2, 400);
  Mailbox& mailbox = peers.mailbox();
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
  MailboxOnFabric peers(2);
  Mailbox& mailbox = peers.mailbox();
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
  MailboxOnFabric peers(2);
  Mailbox& mailbox = peers.mailbox();
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
  MailboxOnFabric peers(3);
  Mailbox& mailbox = peers.mailbox();
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
  MailboxOnFabric peers(2);
  Mailbox& mailbox = peers.mailbox();
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
  MailboxOnFabric peers(2);
  Mailbox& mailbox = peers.mailbox();
  ASSERT_TRUE(peers.connect());
  const uint64_t before = mailbox.down_count(1);
  std::thread dropper([&] { peers.stop(1); });
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
  MailboxOnFabric peers(3);
  Mailbox& mailbox = peers.mailbox();
  const auto later = Clock::now() + std::chrono::seconds(30);
  ASSERT_TRUE(peers.connect());
  EXPECT_TRUE(mailbox.wait_to_send(1, 3, 8, mailbox.down_count(1), later).ok());

  // Peer 2 goes down after the operation started (its count was read before).
  const uint64_t before = mailbox.down_count(2);
  ASSERT_TRUE(peers.drop(2));
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
  MailboxOnFabric peers(2);
  Mailbox& mailbox = peers.mailbox();
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
