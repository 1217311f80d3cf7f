// The steps every policy takes for one tensor once it has picked a codec for the job: warm-up and
// small tensors stay dense, compression that costs more time than it saves is turned off
// (break-even), and the tensor's layer rule applies last.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "control/policy/cost_model.h"
#include "control/policy/layer_rules.h"
#include "control/policy/policy_config.h"

namespace gradgate::control {

struct TensorChoice {
  kernels::CodecParams codec;
  std::string reason;                // as in TensorDecision::reason
  const ParsedRule* rule = nullptr;  // the layer rule matching the tensor, if any
};

/// The codec of `tensor` at `step` when the policy picked `job_codec` for `job_reason`. With a
/// cost model, `job_codec` is replaced by none where encode + decode seconds >= the wire seconds
/// it saves against none.
Result<TensorChoice> choose_tensor_codec(const PolicyConfig& config, uint64_t step,
                                         const TensorSample& tensor,
                                         const kernels::CodecParams& job_codec,
                                         const std::string& job_reason, const CostModel* cost);

/// The same codec for every tensor, as `choose_tensor_codec` makes it.
Result<std::vector<TensorChoice>> choose_codecs(const PolicyConfig& config,
                                                const Measurements& measurements,
                                                const kernels::CodecParams& job_codec,
                                                const std::string& job_reason,
                                                const CostModel* cost);

/// Wire seconds per step of one gateway when every gateway sends each tensor with its choice.
Result<double> communicate_seconds(const CostModel& cost, const Measurements& measurements,
                                   const std::vector<TensorChoice>& choices);

/// The public decision when every gateway uses the same codec for each tensor.
PolicyDecision uniform_decision(const Measurements& measurements,
                                const std::vector<TensorChoice>& choices,
                                std::optional<double> communicate_seconds);

}  // namespace gradgate::control
