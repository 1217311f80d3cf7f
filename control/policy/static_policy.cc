#include <optional>

#include "control/policy/policies.h"
#include "control/policy/tensor_choice.h"

namespace gradgate::control {
namespace {

// default_codec for every tensor (warm-up, small tensors and rules aside); the predicted time is
// reported once a link has been measured, but never changes the choice.
class StaticPolicy final : public Policy {
 public:
  explicit StaticPolicy(PolicyConfig config) : config_(std::move(config)) {}
  std::string_view name() const override { return "static"; }

 private:
  Result<PolicyDecision> decide_checked(const Measurements& measurements) const override {
    auto choices = choose_codecs(config_, measurements, config_.default_codec, "static", nullptr);
    if (!choices.ok()) return choices.status();
    std::optional<double> seconds;
    if (const auto cost =
            CostModel::for_job(measurements, config_.default_codec_bytes_per_second)) {
      auto predicted = communicate_seconds(*cost, measurements, *choices);
      if (!predicted.ok()) return predicted.status();
      seconds = *predicted;
    }
    return uniform_decision(measurements, *choices, seconds);
  }

  PolicyConfig config_;
};

}  // namespace

std::unique_ptr<Policy> make_static_policy(PolicyConfig config) {
  return std::make_unique<StaticPolicy>(std::move(config));
}

}  // namespace gradgate::control
