#include "control/policy/ladder_plan.h"
#include "control/policy/policies.h"

namespace gradgate::control {

namespace {

class BandwidthPolicy final : public Policy {
 public:
  explicit BandwidthPolicy(PolicyConfig config) : config_(std::move(config)) {}
  std::string_view name() const override { return "bandwidth"; }

 private:
  Result<PolicyDecision> decide_checked(const Measurements& measurements) const override {
    const auto cost = CostModel::for_job(measurements, config_.default_codec_bytes_per_second);
    if (!cost) return fallback_decision(config_, measurements);
    auto plan = plan_ladder(config_, measurements, *cost, config_.ladder);
    if (!plan.ok()) return plan.status();
    return uniform_decision(measurements, plan->choices, plan->communicate_seconds);
  }

  PolicyConfig config_;
};

}  // namespace

std::unique_ptr<Policy> make_bandwidth_policy(PolicyConfig config) {
  return std::make_unique<BandwidthPolicy>(std::move(config));
}

}  // namespace gradgate::control
