// A step that fails on one gateway before its collective can run (a local worker left, or did not
// ask within the timeout) fails on every gateway of the job at once, not at their timeout, and
// every gateway goes on at the same next step, which sums as usual.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "outcome.h"
#include "two_gateways.h"

namespace gradgate::gateway {
namespace {

using testing::buffer_of;
using testing::kElements;
using testing::kSpec;
using testing::Outcome;
using testing::TwoGateways;

constexpr auto kLimit = std::chrono::seconds(20);

// A job of two gateways with two local workers each; worker 1's buffers are the test's.
class TwoWorkersEach : public ::testing::Test {
 protected:
  void SetUp() override {
    for (uint32_t rank = 0; rank < 2; ++rank) join_worker1(rank);
    // Step 0 connects the gateways (an abort reaches only a connected peer).
    expect_a_good_step(0);
  }
  // Local worker 1 joins gateway `rank` and declares the job's tensor.
  void join_worker1(uint32_t rank) {
    ASSERT_TRUE(job.gateway(rank).on_worker_joined(1).ok());
    auto key = job.gateway(rank).on_declare(1, kSpec, buffer_of(worker1[rank]));
    ASSERT_TRUE(key.ok()) << key.status().to_string();
    ASSERT_EQ(*key, job.key(rank));
  }
  // Local worker `local_rank` of gateway `rank` asks for the tensor's next step.
  Outcome& ask(uint32_t rank, uint32_t local_rank) {
    Outcome& outcome = outcomes.emplace_back();
    job.gateway(rank).on_allreduce(local_rank, job.key(rank), outcome.callback());
    return outcome;
  }
  // A step every worker asks for, worker w of gateway g adding 2g + w + 1: each gets 10.
  void expect_a_good_step(uint64_t step) {
    std::array<std::array<Outcome*, 2>, 2> asked;
    for (uint32_t rank = 0; rank < 2; ++rank) {
      std::fill(job.buffer(rank).begin(), job.buffer(rank).end(), 2.0f * rank + 1.0f);
      std::fill(worker1[rank].begin(), worker1[rank].end(), 2.0f * rank + 2.0f);
    }
    for (uint32_t rank = 0; rank < 2; ++rank) {
      for (uint32_t local_rank = 0; local_rank < 2; ++local_rank) {
        asked[rank][local_rank] = &ask(rank, local_rank);
      }
    }
    for (uint32_t rank = 0; rank < 2; ++rank) {
      for (Outcome* outcome : asked[rank]) {
        const auto done = outcome->wait(kLimit);
        ASSERT_TRUE(done.has_value());
        ASSERT_TRUE(done->status.ok()) << "gateway " << rank << ": " << done->status.to_string();
        EXPECT_EQ(done->step, step);
      }
      EXPECT_EQ(job.buffer(rank), std::vector<float>(kElements, 10.0f)) << "gateway " << rank;
      EXPECT_EQ(worker1[rank], std::vector<float>(kElements, 10.0f)) << "gateway " << rank;
    }
  }

  // Before the job: the gateways complete what is pending as they stop, even after a failed
  // assertion ended a test early.
  std::deque<Outcome> outcomes;
  TwoGateways job{"none", 1, 2};
  std::array<std::vector<float>, 2> worker1{std::vector<float>(kElements),
                                            std::vector<float>(kElements)};
};

// Expects `outcome` to be a failure of step `step` whose message says `what`.
void expect_failed(Outcome& outcome, uint64_t step, ErrorCode code, const std::string& what) {
  const auto done = outcome.wait(kLimit);
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->status.code(), code) << done->status.to_string();
  EXPECT_NE(done->status.message().find(what), std::string::npos) << done->status.to_string();
  EXPECT_EQ(done->step, step);
}

TEST_F(TwoWorkersEach, AWorkerThatLeavesFailsTheStepOnEveryGatewayAtOnce) {
  Outcome& peer0 = ask(1, 0);
  Outcome& peer1 = ask(1, 1);
  Outcome& asked = ask(0, 0);
  job.gateway(0).on_worker_left(1);
  // Gateway 1 hears of it from gateway 0; without that it would fail at its 5 s timeout, with
  // kTimeout.
  expect_failed(asked, 1, ErrorCode::kAborted, "local worker 1 left");
  expect_failed(peer0, 1, ErrorCode::kAborted, "gateway 0 aborted the all-reduce");
  expect_failed(peer1, 1, ErrorCode::kAborted, "local worker 1 left");
  join_worker1(0);
  expect_a_good_step(2);
}

// A worker that left between steps (most die while computing): the next step fails as soon as a
// worker of its node asks for it, on every gateway, instead of at the timeout.
TEST_F(TwoWorkersEach, AWorkerThatLeftBetweenStepsFailsTheNextOneOnEveryGatewayAtOnce) {
  job.gateway(0).on_worker_left(1);
  Outcome& peer0 = ask(1, 0);
  Outcome& peer1 = ask(1, 1);
  Outcome& asked = ask(0, 0);
  expect_failed(asked, 1, ErrorCode::kAborted, "local worker 1 left or released");
  expect_failed(peer0, 1, ErrorCode::kAborted, "local worker 1 left or released");
  expect_failed(peer1, 1, ErrorCode::kAborted, "local worker 1 left or released");
  // Back (a restarted worker declares again), the steps go on.
  join_worker1(0);
  expect_a_good_step(2);
}

// A tensor released by one local worker can no longer complete a step on its node; once every
// local worker released it, the gateway drops it with its state.
TEST_F(TwoWorkersEach, AReleasedTensorIsDroppedOnceEveryLocalWorkerReleasedIt) {
  const GatewayStats before = job.gateway(0).stats();
  job.gateway(0).on_release(1, job.key(0));
  EXPECT_EQ(job.gateway(0).stats().tensors, before.tensors) << "worker 0 still holds it";
  expect_failed(ask(0, 0), 1, ErrorCode::kAborted, "local worker 1 left or released");
  job.gateway(0).on_release(0, job.key(0));
  EXPECT_EQ(job.gateway(0).stats().tensors, before.tensors - 1);
  EXPECT_LT(job.gateway(0).stats().residual_bytes, before.residual_bytes);
}

TEST_F(TwoWorkersEach, AStepALocalWorkerDidNotAskForInTimeLeavesEveryGatewayAtTheSameNextStep) {
  Outcome& peer0 = ask(1, 0);
  Outcome& peer1 = ask(1, 1);
  Outcome& asked = ask(0, 0);
  expect_failed(asked, 1, ErrorCode::kTimeout, "only 1 of the 2 local workers asked");
  // Gateway 1 times out too, or hears of gateway 0's timeout first.
  for (Outcome* peer : {&peer0, &peer1}) {
    const auto done = peer->wait(kLimit);
    ASSERT_TRUE(done.has_value());
    EXPECT_FALSE(done->status.ok());
  }
  expect_a_good_step(2);
}

// While a step runs, the next one fails on this gateway: the peers hear of it, and the running
// step still gets what they send for it.
TEST_F(TwoWorkersEach, TheStepAfterARunningOneFailsWithoutDisturbingIt) {
  const uint64_t delivered = job.gateway(1).mailbox_stats().delivered;
  ask(0, 0);
  ask(0, 1);
  // Gateway 0's step 1 has gathered its node sum once its first message reaches gateway 1.
  const auto deadline = std::chrono::steady_clock::now() + kLimit;
  while (job.gateway(1).mailbox_stats().delivered == delivered &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  ASSERT_GT(job.gateway(1).mailbox_stats().delivered, delivered);
  // Worker 1 leaves and comes back for step 2; then worker 0 leaves, which fails step 2.
  job.gateway(0).on_worker_left(1);
  join_worker1(0);
  Outcome& next = ask(0, 1);
  job.gateway(0).on_worker_left(0);
  expect_failed(next, 2, ErrorCode::kAborted, "local worker 0 left");

  // Gateway 1's running step ends well only if gateway 0's did (each sends its reduced half of the
  // ring after the other's half reached it).
  for (Outcome* peer : {&ask(1, 0), &ask(1, 1)}) {
    const auto done = peer->wait(kLimit);
    ASSERT_TRUE(done.has_value());
    EXPECT_TRUE(done->status.ok()) << done->status.to_string();
  }
  for (Outcome* peer : {&ask(1, 0), &ask(1, 1)}) {
    expect_failed(*peer, 2, ErrorCode::kAborted, "local worker 0 left");
  }
}

}  // namespace
}  // namespace gradgate::gateway
