// The bandwidth policy's job-wide choice, shared with the DAGC policies: the mildest codec of a
// ladder whose predicted communicate time meets the target, and what both do without a link sample.
#pragma once

#include <span>
#include <vector>

#include "control/policy/cost_model.h"
#include "control/policy/policy_config.h"
#include "control/policy/tensor_choice.h"

namespace gradgate::control {

struct LadderPlan {
  kernels::CodecParams job_codec;     // the ladder entry chosen for the job
  std::vector<TensorChoice> choices;  // per tensor, after warm-up, size, break-even and rules
  double communicate_seconds = 0.0;   // predicted, per gateway and step
};

/// The first entry of `ladder` (mildest first, not empty) whose per-tensor choices send the step's
/// tensors within config.target_communicate_seconds; the last entry, with reason
/// "bandwidth: target not met", when none does.
Result<LadderPlan> plan_ladder(const PolicyConfig& config, const Measurements& measurements,
                               const CostModel& cost, std::span<const kernels::CodecParams> ladder);

/// The decision of the bandwidth and DAGC policies before the first link sample: default_codec
/// (warm-up, small tensors and rules aside), reason "no bandwidth sample".
Result<PolicyDecision> fallback_decision(const PolicyConfig& config,
                                         const Measurements& measurements);

}  // namespace gradgate::control
