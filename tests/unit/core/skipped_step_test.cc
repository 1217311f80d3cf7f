// A step skipped for a non-finite gradient (mixed precision meets them while its loss scale is too
// high) leaves no trace in later steps: every gateway starts the tensor's error feedback afresh,
// so neither the scaled gradients of the skipped step nor residuals built under that loss scale
// reach the steps after it.
#include <gtest/gtest.h>

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
