// A step skipped for a non-finite gradient (mixed precision meets them while its loss scale is too
// high) leaves no trace in later steps: every gateway starts the error feedback of every tensor
// afresh after it, that of the bucket that was skipped and those of the other buckets of the
// same training step, which completed but which the loss scaler drops too; so neither the scaled
// gradients of that step nor residuals built under that loss scale reach the steps after it.
#include <gtest/gtest.h>

#include <array>
#include <limits>
#include <random>

#include "two_gateways.h"

namespace gradgate::gateway {
namespace {

using testing::random_inputs;
using testing::TwoGateways;

constexpr const char* kTopk = "topk:density=0.05";

TEST(SkippedStep, TheStepAfterASkippedOneIsWhatAFreshJobWouldCompute) {
  std::mt19937 random(11);
  const auto before = random_inputs(random);
  auto skipped = random_inputs(random);
  skipped[1][123] = std::numeric_limits<float>::infinity();
  const auto after = random_inputs(random);

  TwoGateways job(kTopk);
  for (const auto& outcome : job.step(before)) ASSERT_TRUE(outcome.status.ok());
  for (const auto& outcome : job.step(skipped)) {
    ASSERT_EQ(outcome.status.code(), ErrorCode::kNonFiniteGradient) << outcome.status.to_string();
  }
  for (const auto& outcome : job.step(after)) ASSERT_TRUE(outcome.status.ok());

  TwoGateways fresh(kTopk);
  for (const auto& outcome : fresh.step(after)) ASSERT_TRUE(outcome.status.ok());
  for (uint32_t rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(job.result(rank), fresh.result(0))
        << "gateway " << rank << " still carries error feedback from before the skipped step";
  }
}

// Two buckets of one training step: the second completes its step 1 while the first is skipped.
// Its step 2 has no residual of steps 0 and 1 either.
TEST(SkippedStep, TheOtherBucketsOfTheSkippedStepStartAfreshToo) {
  std::mt19937 random(12);
  std::array<std::array<std::vector<float>, 2>, 3> inputs;
  for (auto& step : inputs) step = random_inputs(random);
  auto skipped = inputs[1];
  skipped[0][7] = std::numeric_limits<float>::quiet_NaN();

  TwoGateways job(kTopk, 2);
  for (size_t bucket = 0; bucket < 2; ++bucket) {
    for (const auto& outcome : job.step(inputs[0], bucket)) ASSERT_TRUE(outcome.status.ok());
  }
  for (const auto& outcome : job.step(skipped, 0)) {
    ASSERT_EQ(outcome.status.code(), ErrorCode::kNonFiniteGradient) << outcome.status.to_string();
  }
  for (const auto& outcome : job.step(inputs[1], 1)) ASSERT_TRUE(outcome.status.ok());
  for (size_t bucket = 0; bucket < 2; ++bucket) {
    for (const auto& outcome : job.step(inputs[2], bucket)) ASSERT_TRUE(outcome.status.ok());
  }

  TwoGateways fresh(kTopk, 2);
  for (size_t bucket = 0; bucket < 2; ++bucket) {
    for (const auto& outcome : fresh.step(inputs[2], bucket)) ASSERT_TRUE(outcome.status.ok());
    for (uint32_t rank = 0; rank < 2; ++rank) {
      EXPECT_EQ(job.result(rank, bucket), fresh.result(0, bucket))
          << "bucket " << bucket << " of gateway " << rank << " carries error feedback from before";
    }
  }
}

// Without a skip, the same three steps carry the first step's residual into the third: what the
// test above tells apart.
TEST(SkippedStep, AStepThatIsNotSkippedKeepsErrorFeedbackGoing) {
  std::mt19937 random(11);
  const auto before = random_inputs(random);
  const auto after = random_inputs(random);

  TwoGateways job(kTopk);
  for (const auto& outcome : job.step(before)) ASSERT_TRUE(outcome.status.ok());
  for (const auto& outcome : job.step(after)) ASSERT_TRUE(outcome.status.ok());
  TwoGateways fresh(kTopk);
  for (const auto& outcome : fresh.step(after)) ASSERT_TRUE(outcome.status.ok());
  EXPECT_NE(job.result(0), fresh.result(0));
}

}  // namespace
}  // namespace gradgate::gateway
