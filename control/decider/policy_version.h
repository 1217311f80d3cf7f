// One versioned decision of a job's policy, as gateways receive it (GET /v1/policy): the codec of
// every tensor on every node, and the step from which the gateways apply it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "control/policy/policy.h"
#include "control/registry/job_registry.h"

namespace gradgate::control {

struct PolicyVersion {
  uint64_t version = 0;  // 0: nothing decided yet (gateways keep their configured codec)
  uint64_t effective_step = 0;
  std::string policy;         // the policy that made it
  std::string default_codec;  // the codec of tensors the decision does not list yet
  std::vector<TensorDecision> tensors;
  std::optional<double> predicted_communicate_seconds;
  /// Raw fp32 bytes over predicted wire bytes per step of the job; 1 when nothing is compressed.
  double target_ratio = 1.0;
  Clock::time_point made{};
  uint64_t made_at_step = 0;  // the largest step of the job's nodes when it was made
};

/// Whether two decisions send every tensor with the same codec on every node.
bool same_codecs(const std::vector<TensorDecision>& a, const std::vector<TensorDecision>& b);

}  // namespace gradgate::control
