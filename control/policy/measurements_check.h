// The checks every Measurements passes before a policy reads it, so that a policy never divides
// by a zero rate or indexes past the job's nodes.
#pragma once

#include <string>

#include "control/policy/policy.h"

namespace gradgate::control {

/// Why a decision for `tensors` tensors on `nodes` nodes would hold more than kMaxPolicyCodecs
/// codecs; empty when it would not.
std::string policy_size_error(uint64_t nodes, uint64_t tensors);

/// kInvalidArgument naming the first unusable field ("links[1].goodput_bytes_per_second: ...").
/// Missing samples are not errors: policies fall back when a link or node has none.
Status check_measurements(const Measurements& measurements);

}  // namespace gradgate::control
