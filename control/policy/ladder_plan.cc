#include "control/policy/ladder_plan.h"

namespace gradgate::control {
namespace {

Result<LadderPlan> plan_with(const PolicyConfig& config, const Measurements& measurements,
                             const CostModel& cost, const kernels::CodecParams& job_codec,
                             const std::string& reason) {
  auto choices = choose_codecs(config, measurements, job_codec, reason, &cost);
  if (!choices.ok()) return choices.status();
  auto seconds = communicate_seconds(cost, measurements, *choices);
  if (!seconds.ok()) return seconds.status();
  return LadderPlan{
      .job_codec = job_codec, .choices = std::move(*choices), .communicate_seconds = *seconds};
}

}  // namespace

Result<LadderPlan> plan_ladder(const PolicyConfig& config, const Measurements& measurements,
                               const CostModel& cost,
                               std::span<const kernels::CodecParams> ladder) {
  for (const kernels::CodecParams& entry : ladder) {
    auto plan = plan_with(config, measurements, cost, entry, "bandwidth");
    if (!plan.ok() || plan->communicate_seconds <= config.target_communicate_seconds) return plan;
  }
  return plan_with(config, measurements, cost, ladder.back(), "bandwidth: target not met");
}

Result<PolicyDecision> fallback_decision(const PolicyConfig& config,
                                         const Measurements& measurements) {
  auto choices =
      choose_codecs(config, measurements, config.default_codec, "no bandwidth sample", nullptr);
  if (!choices.ok()) return choices.status();
  return uniform_decision(measurements, *choices, std::nullopt);
}

}  // namespace gradgate::control
