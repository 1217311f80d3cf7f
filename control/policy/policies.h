// The policies behind make_policy(), each made from checked settings.
#pragma once

#include <memory>

#include "control/policy/dagc.h"
#include "control/policy/policy.h"
#include "control/policy/policy_config.h"

namespace gradgate::control {

std::unique_ptr<Policy> make_static_policy(PolicyConfig config);
std::unique_ptr<Policy> make_bandwidth_policy(PolicyConfig config);
std::unique_ptr<Policy> make_dagc_policy(PolicyConfig config, DagcVariant variant);

}  // namespace gradgate::control
