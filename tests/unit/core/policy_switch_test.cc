// Policies from the control plane, as two in-process gateways over loopback follow them: both
// switch codec at the agreed step, error feedback carries its residual across the switch, and a
// gateway that gets a version late (or skips one) holds the switch back on both sides, so that no
// step fails. Also the table's choice on its own.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "gateway/agreement/policy_table.h"
#include "two_gateways.h"

namespace gradgate::gateway {
namespace {

using testing::kElements;
using testing::kSpec;
using testing::random_inputs;
using testing::TwoGateways;

TEST(PolicySwitch, BothGatewaysSwitchAtTheAgreedStepAndLoseNoResidual) {
  TwoGateways job;
  // Top-k from step 2, back to none from step 5: what top-k held back in its residuals goes out
  // at step 5, so over the six steps the results add up to the inputs.
  for (uint32_t rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(job.gateway(rank).set_policy({1, 2, {{kSpec.name, "topk:density=0.05"}}}).ok());
    ASSERT_TRUE(job.gateway(rank).set_policy({2, 5, {}}).ok());
  }
  std::mt19937 random(3);
  std::vector<double> inputs_sum(kElements, 0.0), results_sum(kElements, 0.0);
  for (uint64_t step = 0; step < 6; ++step) {
    const auto inputs = random_inputs(random);
    const auto outcomes = job.step(inputs);
    for (uint32_t rank = 0; rank < 2; ++rank) {
      ASSERT_TRUE(outcomes[rank].status.ok()) << outcomes[rank].status.to_string();
      EXPECT_EQ(outcomes[rank].step, step);
    }
    ASSERT_EQ(job.result(0), job.result(1)) << "gateways differ at step " << step;
    const bool compressed = step >= 2 && step < 5;
    EXPECT_EQ(outcomes[0].wire_bytes < outcomes[0].raw_bytes / 4, compressed)
        << "step " << step << ": " << outcomes[0].wire_bytes << " wire bytes";
    for (size_t i = 0; i < kElements; ++i) {
      inputs_sum[i] += static_cast<double>(inputs[0][i]) + inputs[1][i];
      results_sum[i] += job.result(0)[i];
    }
  }
  double worst = 0.0;
  for (size_t i = 0; i < kElements; ++i) {
    worst =
        std::max(worst, std::abs(results_sum[i] - inputs_sum[i]) / (1.0 + std::abs(inputs_sum[i])));
  }
  EXPECT_LT(worst, 1e-4) << "residuals were lost in the switches";
  EXPECT_EQ(job.gateway(0).stats().applied_policy_version, 2u);
  EXPECT_EQ(job.gateway(0).stats().policy_version, 2u);
}

// Runs `steps` steps; every one must succeed on both gateways with equal results. Returns
// whether each step went compressed (fewer than a quarter of the raw bytes on the wire).
std::vector<bool> run_steps(TwoGateways& job, std::mt19937& random, int steps) {
  std::vector<bool> compressed;
  for (int i = 0; i < steps; ++i) {
    const auto outcomes = job.step(random_inputs(random));
    for (uint32_t rank = 0; rank < 2; ++rank) {
      EXPECT_TRUE(outcomes[rank].status.ok()) << outcomes[rank].status.to_string();
    }
    EXPECT_EQ(job.result(0), job.result(1)) << "gateways differ";
    compressed.push_back(outcomes[0].wire_bytes < outcomes[0].raw_bytes / 4);
  }
  return compressed;
}

// Under compression.collective: ring, a policy that names top-k (which does not sum) cannot run:
// both gateways keep the codec they have, mark the tensor off its policy, and take the version as
// applied; no step fails, and the next version that they can run applies.
TEST(PolicySwitch, ACodecTheGatewaysCannotRunKeepsTheirCodecAndNoStepFails) {
  TwoGateways job("none", 1, 1,
                  [](GatewayConfig& config) { config.collective = CollectiveMode::kRing; });
  for (uint32_t rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(job.gateway(rank).set_policy({1, 1, {{kSpec.name, "topk:density=0.05"}}}).ok());
    ASSERT_TRUE(job.gateway(rank).set_policy({2, 4, {{kSpec.name, "fp16"}}}).ok());
  }
  std::mt19937 random(8);
  run_steps(job, random, 3);
  for (uint32_t rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(job.gateway(rank).tensors().at(0).codec, "none");
    EXPECT_EQ(job.gateway(rank).stats().applied_policy_version, 1u);
    EXPECT_EQ(job.gateway(rank).stats().tensors_off_policy, 1u);
  }
  run_steps(job, random, 2);
  for (uint32_t rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(job.gateway(rank).tensors().at(0).codec, "fp16");
    EXPECT_EQ(job.gateway(rank).stats().applied_policy_version, 2u);
    EXPECT_EQ(job.gateway(rank).stats().tensors_off_policy, 0u);
  }
}

TEST(PolicySwitch, AVersionOneGatewayGetsLateWaitsForItAndNoStepFails) {
  TwoGateways job;
  const CodecPolicy topk{1, 0, {{kSpec.name, "topk:density=0.05"}}};
  ASSERT_TRUE(job.gateway(0).set_policy(topk).ok());
  std::mt19937 random(4);
  EXPECT_EQ(run_steps(job, random, 3), std::vector<bool>(3, false));
  EXPECT_EQ(job.gateway(0).stats().applied_policy_version, 0u);
  // Once the late gateway has it, the step after the next one (which shows that both hold it)
  // switches on both sides.
  ASSERT_TRUE(job.gateway(1).set_policy(topk).ok());
  EXPECT_EQ(run_steps(job, random, 3), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(job.gateway(0).stats().applied_policy_version, 1u);
  EXPECT_EQ(job.gateway(1).stats().applied_policy_version, 1u);
}

TEST(PolicySwitch, AGatewayThatSkippedAVersionIsNotAskedToRunIt) {
  TwoGateways job;
  const CodecPolicy topk{1, 0, {{kSpec.name, "topk:density=0.05"}}};
  const CodecPolicy fp16{2, 0, {{kSpec.name, "fp16"}}};
  ASSERT_TRUE(job.gateway(0).set_policy(topk).ok());
  ASSERT_TRUE(job.gateway(1).set_policy(fp16).ok());  // never saw version 1
  std::mt19937 random(5);
  EXPECT_EQ(run_steps(job, random, 3), std::vector<bool>(3, false));
  EXPECT_EQ(job.gateway(1).stats().applied_policy_version, 0u);
  ASSERT_TRUE(job.gateway(0).set_policy(fp16).ok());
  run_steps(job, random, 3);
  for (uint32_t rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(job.gateway(rank).stats().applied_policy_version, 2u);
    EXPECT_EQ(job.gateway(rank).tensors().at(0).codec, "fp16");
  }
}

TEST(PolicySwitch, AGatewayOneVersionBehindCatchesUpAtOnce) {
  TwoGateways job;
  // The same version with another effective step on each side puts gateway 1 a version behind at
  // step 1, as a step that succeeded on one side only would.
  ASSERT_TRUE(job.gateway(0).set_policy({1, 1, {{kSpec.name, "topk:density=0.05"}}}).ok());
  ASSERT_TRUE(job.gateway(1).set_policy({1, 50, {{kSpec.name, "topk:density=0.05"}}}).ok());
  std::mt19937 random(6);
  run_steps(job, random, 1);
  // Gateway 1 catches up at step 1 if gateway 0's message of that step arrives before the step
  // starts there; otherwise step 1 fails on both sides, and it catches up at step 2.
  const auto first = job.step(random_inputs(random));
  EXPECT_EQ(first[0].status.ok(), first[1].status.ok());
  for (uint32_t rank = 0; rank < 2 && !first[rank].status.ok(); ++rank) {
    EXPECT_NE(first[rank].status.message().find("policy version"), std::string::npos)
        << first[rank].status.to_string();
  }
  EXPECT_EQ(run_steps(job, random, 2), (std::vector<bool>{true, true}));
  EXPECT_EQ(job.gateway(1).stats().applied_policy_version, 1u);
}

TEST(PolicySwitch, AVersionAgreedOnStaysWhileManyNewerOnesCome) {
  TwoGateways job;
  const CodecPolicy topk{1, 0, {{kSpec.name, "topk:density=0.05"}}};
  for (uint32_t rank = 0; rank < 2; ++rank) ASSERT_TRUE(job.gateway(rank).set_policy(topk).ok());
  std::mt19937 random(7);
  EXPECT_EQ(run_steps(job, random, 1), std::vector<bool>{false});  // shows both hold version 1
  // Gateway 0 alone gets 29 newer versions, none in effect yet: it still runs version 1.
  for (uint32_t version = 2; version <= 30; ++version) {
    ASSERT_TRUE(job.gateway(0).set_policy({version, 1000, {}}).ok());
  }
  EXPECT_EQ(run_steps(job, random, 2), (std::vector<bool>{true, true}));
}

TEST(PolicyTable, HoldsTheNewestVersionsWithoutAGap) {
  PolicyTable table;
  EXPECT_EQ(table.held(), (HeldPolicies{0, 0}));
  ASSERT_TRUE(table.add({1, 0, {}}, 0));
  ASSERT_TRUE(table.add({2, 0, {}}, 0));
  EXPECT_EQ(table.held(), (HeldPolicies{1, 2}));
  ASSERT_TRUE(table.add({4, 0, {}}, 0));  // version 3 never came
  EXPECT_EQ(table.held(), (HeldPolicies{4, 4}));
  EXPECT_FALSE(table.add({3, 0, {}}, 0));  // older than the newest: ignored
  EXPECT_EQ(table.latest_version(), 4u);
}

TEST(PolicyTable, DropsOnlyVersionsNoTensorCanGoBackTo) {
  PolicyTable table;
  for (uint32_t version = 1; version <= 40; ++version) ASSERT_TRUE(table.add({version, 0, {}}, 0));
  EXPECT_EQ(table.held(), (HeldPolicies{1, 40}));
  ASSERT_TRUE(table.add({41, 0, {}}, 38));  // every tensor runs version 38 or newer
  EXPECT_EQ(table.held(), (HeldPolicies{38, 41}));
  EXPECT_EQ(table.find(37), nullptr);
  ASSERT_NE(table.find(38), nullptr);
}

TEST(PolicyTable, ChoosesTheNewestVersionInEffectThatAllHold) {
  PolicyTable table;
  ASSERT_TRUE(table.add({1, 10, {}}, 0));
  ASSERT_TRUE(table.add({2, 20, {}}, 0));
  ASSERT_TRUE(table.add({3, 30, {}}, 0));
  const auto version_at = [&](uint64_t step, HeldPolicies held_by_all) {
    const CodecPolicy* policy = table.in_effect(step, held_by_all);
    return policy == nullptr ? 0u : policy->version;
  };
  EXPECT_EQ(version_at(9, {1, 3}), 0u);   // none in effect yet
  EXPECT_EQ(version_at(25, {1, 3}), 2u);  // the newest in effect
  EXPECT_EQ(version_at(35, {1, 3}), 3u);
  EXPECT_EQ(version_at(35, {1, 2}), 2u);  // a gateway lacks 3
  EXPECT_EQ(version_at(35, {3, 1}), 0u);  // no version that all hold
  EXPECT_EQ(version_at(35, {0, 0}), 0u);  // a gateway holds none
}

TEST(PolicySwitch, BadSpecsAndOldVersionsAreRefusedOrIgnored) {
  TwoGateways job;
  const Status bad = job.gateway(0).set_policy({1, 0, {{kSpec.name, "zstd"}}});
  EXPECT_EQ(bad.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.message().find(kSpec.name), std::string::npos) << bad.to_string();
  ASSERT_TRUE(job.gateway(0).set_policy({3, 0, {}}).ok());
  ASSERT_TRUE(job.gateway(0).set_policy({2, 0, {{kSpec.name, "fp16"}}}).ok());  // older: ignored
  EXPECT_EQ(job.gateway(0).stats().policy_version, 3u);
}

}  // namespace
}  // namespace gradgate::gateway
