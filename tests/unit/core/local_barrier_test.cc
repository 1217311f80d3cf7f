#include "gateway/core/local_barrier.h"

#include <gtest/gtest.h>

#include <vector>

namespace gradgate::gateway {
namespace {

// A request that records how it was completed.
LocalBarrier::Done recorder(std::vector<uint64_t>& completed) {
  return [&completed](AllreduceOutcome outcome) { completed.push_back(outcome.step); };
}

TEST(LocalBarrier, AStepBeginsOnceEveryLocalWorkerAsked) {
  LocalBarrier barrier(3);
  std::vector<uint64_t> completed;
  barrier.ask(0, recorder(completed));
  barrier.ask(2, recorder(completed));
  EXPECT_EQ(barrier.waiting(), 2u);
  EXPECT_FALSE(barrier.begin_step());
  barrier.ask(1, recorder(completed));
  const auto step = barrier.begin_step();
  ASSERT_TRUE(step);
  EXPECT_EQ(*step, 0u);
  EXPECT_TRUE(barrier.running());
  EXPECT_EQ(barrier.waiting(), 0u);
  EXPECT_TRUE(barrier.has_request(1));  // in the running step
  EXPECT_EQ(barrier.next_step(), 1u);
}

TEST(LocalBarrier, TheNextStepWaitsForTheRunningOne) {
  LocalBarrier barrier(1);
  std::vector<uint64_t> completed;
  barrier.ask(0, recorder(completed));
  ASSERT_TRUE(barrier.begin_step());
  // No step begins while one runs.
  EXPECT_FALSE(barrier.begin_step());
  auto done = barrier.end_step();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_FALSE(barrier.running());
  EXPECT_FALSE(barrier.has_request(0));
  barrier.ask(0, recorder(completed));
  const auto step = barrier.begin_step();
  ASSERT_TRUE(step);
  EXPECT_EQ(*step, 1u);
}

TEST(LocalBarrier, ASkippedStepCompletesItsWaitingRequestsAndMovesOn) {
  LocalBarrier barrier(2);
  std::vector<uint64_t> completed;
  barrier.ask(1, recorder(completed));
  auto [step, waiting] = barrier.skip_step();
  EXPECT_EQ(step, 0u);
  ASSERT_EQ(waiting.size(), 1u);
  waiting[0](AllreduceOutcome{Status(ErrorCode::kAborted, "x"), step});
  EXPECT_EQ(completed, std::vector<uint64_t>{0});
  EXPECT_EQ(barrier.waiting(), 0u);
  EXPECT_EQ(barrier.next_step(), 1u);
}

TEST(LocalBarrier, UndoBeginPutsTheRequestsBackAndTheStepNumber) {
  LocalBarrier barrier(1);
  std::vector<uint64_t> completed;
  barrier.ask(0, recorder(completed));
  const auto step = barrier.begin_step();
  ASSERT_TRUE(step);
  barrier.undo_begin(*step);
  EXPECT_FALSE(barrier.running());
  EXPECT_EQ(barrier.waiting(), 1u);
  EXPECT_EQ(barrier.next_step(), *step);
}

TEST(LocalBarrier, AWorkerThatLeftIsDepartedUntilItDeclaresAgain) {
  LocalBarrier barrier(2);
  std::vector<uint64_t> completed;
  barrier.ask(0, recorder(completed));
  barrier.ask(1, recorder(completed));
  ASSERT_TRUE(barrier.begin_step());
  EXPECT_FALSE(barrier.left_step());
  barrier.detach(1, /*had_buffer=*/true);
  EXPECT_EQ(barrier.left_step(), 1u);
  EXPECT_EQ(barrier.in_step(), (std::vector<bool>{true, false}));
  EXPECT_EQ(barrier.departed(), 1u);
  barrier.rejoined(1);
  EXPECT_FALSE(barrier.departed());
  // One that never declared the tensor is not departed.
  barrier.detach(0, /*had_buffer=*/false);
  EXPECT_FALSE(barrier.departed());
}

TEST(LocalBarrier, OverdueOnlyWhenSomeAskedLongEnoughAgoAndNoStepRuns) {
  LocalBarrier barrier(2);
  std::vector<uint64_t> completed;
  const auto timeout = std::chrono::milliseconds(1000);
  const auto now = LocalBarrier::Clock::now();
  EXPECT_FALSE(barrier.overdue(now + timeout, timeout));  // nobody asked
  barrier.ask(0, recorder(completed));
  EXPECT_FALSE(barrier.overdue(LocalBarrier::Clock::now(), timeout));
  EXPECT_TRUE(barrier.overdue(LocalBarrier::Clock::now() + timeout, timeout));
}

}  // namespace
}  // namespace gradgate::gateway
