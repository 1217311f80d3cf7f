#include "control/decider/decider.h"

#include <algorithm>
#include <cmath>

#include "control/policy/cost_model.h"
#include "gradgate/kernels/codec_spec.h"

namespace gradgate::control {

Result<Decider> Decider::make(PolicySettings settings, VersionSchedule schedule) {
  auto policy = make_policy(settings);
  if (!policy.ok()) return policy.status();
  return Decider(std::move(settings), std::move(*policy), schedule);
}

Status Decider::set_settings(PolicySettings settings) {
  auto policy = make_policy(settings);
  if (!policy.ok()) return policy.status();
  settings_ = std::move(settings);
  policy_ = std::move(*policy);
  return {};
}

uint64_t Decider::lead_steps(const JobState& job) const {
  uint64_t steps = schedule_.min_lead_steps;
  if (job.seconds_per_step && *job.seconds_per_step > 0) {
    const double ahead = std::ceil(schedule_.lead_seconds / *job.seconds_per_step);
    if (ahead > static_cast<double>(steps)) steps = static_cast<uint64_t>(std::min(ahead, 1e12));
  }
  return steps;
}

Result<std::optional<PolicyVersion>> Decider::decide(const JobState& job,
                                                     const Measurements& measurements,
                                                     const PolicyVersion& current,
                                                     Clock::time_point now) const {
  auto decision = policy_->decide(measurements);
  if (!decision.ok()) return decision.status();
  const uint64_t step = JobRegistry::max_step(job);
  // Every node is behind the step the current version was made at: the job's gateways restarted
  // and count their steps from 0 again, so that its effective step lies a whole run ahead (until
  // then they would keep their configured codecs). The same codecs then get a new version.
  const bool steps_went_back = current.version > 0 && step < current.made_at_step;
  if (same_codecs(decision->tensors, current.tensors) && !steps_went_back) {
    return std::optional<PolicyVersion>();
  }
  if (current.version > 0 && now - current.made < schedule_.min_interval) {
    return std::optional<PolicyVersion>();
  }
  // Gateways that hold versions of a controller that ran before this one: the first version
  // waits for every node's report, so that it is numbered above all they hold (a number one of
  // them already holds with other codecs would be ignored by it and taken by the others).
  const uint64_t known = JobRegistry::max_known_version(job);
  if (current.version == 0 && known > 0 && job.members.size() < job.nodes) {
    return std::optional<PolicyVersion>();
  }
  return std::optional<PolicyVersion>(PolicyVersion{
      .version = std::max(current.version, known) + 1,
      .effective_step = step + lead_steps(job),
      .policy = std::string(policy_->name()),
      .default_codec = settings_.default_codec,
      .tensors = decision->tensors,
      .predicted_communicate_seconds = decision->predicted_communicate_seconds,
      .target_ratio = predicted_ratio(measurements, *decision),
      .made = now,
      .made_at_step = step,
  });
}

double predicted_ratio(const Measurements& measurements, const PolicyDecision& decision) {
  // Only the bytes matter here, so any goodput and codec speed will do.
  const CostModel model(measurements.nodes, 1.0, {}, 1.0);
  // Raw: codec none, which the cost model prices in the tensor's dtype, as DDP would send it
  // (and the gateways count it).
  const kernels::CodecParams none{.id = CodecId::kNone};
  double raw = 0.0;
  double wire = 0.0;
  for (std::size_t t = 0; t < decision.tensors.size() && t < measurements.tensors.size(); ++t) {
    const TensorSample& tensor = measurements.tensors[t];
    auto raw_cost = model.cost(none, tensor);
    if (!raw_cost.ok()) continue;
    for (const std::string& spec : decision.tensors[t].codec_per_node) {
      auto codec = kernels::parse_codec_spec(spec);
      auto cost = codec.ok() ? model.cost(*codec, tensor) : Result<CodecCost>(codec.status());
      raw += raw_cost->wire_bytes;
      wire += cost.ok() ? cost->wire_bytes : raw_cost->wire_bytes;
    }
  }
  return wire > 0 ? raw / wire : 1.0;
}

}  // namespace gradgate::control
