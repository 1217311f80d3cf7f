// PolicySettings checked and parsed once, when a policy is made: codec specs become CodecParams,
// rules get their bounds. Every policy works from this form.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "control/policy/layer_rules.h"
#include "control/policy/policy.h"
#include "gradgate/kernels/codec_spec.h"

namespace gradgate::control {

struct PolicyConfig {
  std::string name;
  kernels::CodecParams default_codec;
  std::vector<kernels::CodecParams> ladder;  // mildest first, never empty
  double target_communicate_seconds = 0.0;
  uint64_t warmup_steps = 0;
  uint64_t min_compress_elements = 0;
  std::optional<double> traffic_budget;
  double min_keep_fraction = 0.0;
  double default_codec_bytes_per_second = 0.0;
  std::vector<ParsedRule> rules;
};

/// Checks every setting; kInvalidArgument names the first bad one ("ladder[3]: ...").
Result<PolicyConfig> parse_policy_settings(const PolicySettings& settings);

}  // namespace gradgate::control
