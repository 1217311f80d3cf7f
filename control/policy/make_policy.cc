#include "control/policy/policies.h"

namespace gradgate::control {

Result<std::unique_ptr<Policy>> make_policy(const PolicySettings& settings) {
  auto config = parse_policy_settings(settings);
  if (!config.ok()) return config.status();
  if (settings.name == "static") return make_static_policy(std::move(*config));
  if (settings.name == "bandwidth") return make_bandwidth_policy(std::move(*config));
  if (settings.name == "dagc-r") return make_dagc_policy(std::move(*config), DagcVariant::kExact);
  if (settings.name == "dagc-a") {
    return make_dagc_policy(std::move(*config), DagcVariant::kApproximate);
  }
  return Status(ErrorCode::kInvalidArgument,
                "name: unknown policy '" + settings.name + "' (static, bandwidth, dagc-r, dagc-a)");
}

}  // namespace gradgate::control
