// The policy runner of the controller: runs the configured policy on a job's measurements and
// turns a changed decision into a new PolicyVersion, with its effective step (far enough ahead
// for every gateway to learn of it) and a rate limit. Not thread-safe: the controller guards it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

#include "control/decider/policy_version.h"
#include "control/policy/policy.h"
#include "control/registry/job_registry.h"
#include "gradgate/base/status.h"

namespace gradgate::control {

/// When a new version takes effect, and how often one may be made.
struct VersionSchedule {
  double lead_seconds = 1.0;    // at least this far ahead, at the measured seconds per step ...
  uint64_t min_lead_steps = 4;  // ... and at least this many steps ahead
  std::chrono::milliseconds min_interval{1000};  // between two versions of a job
};

class Decider {
 public:
  /// kInvalidArgument naming the setting when make_policy refuses `settings`.
  static Result<Decider> make(PolicySettings settings, VersionSchedule schedule);

  const PolicySettings& settings() const { return settings_; }
  /// Replaces the settings (for every job); on error the old ones stay.
  Status set_settings(PolicySettings settings);

  /// Runs the policy for `job`. Returns the next version when the decision differs from
  /// `current`'s, or every node's step is below the one `current` was made at (the job's gateways
  /// restarted), and `current` is older than the minimum interval; nullopt otherwise (a change
  /// held back by the rate limit is made by a later call). The next version is above both
  /// `current` and every version the job's nodes apply, so that gateways that outlived a
  /// restarted controller take it. Errors: the measurements were refused.
  Result<std::optional<PolicyVersion>> decide(const JobState& job, const Measurements& measurements,
                                              const PolicyVersion& current,
                                              Clock::time_point now) const;

  /// Whether a job's policy may run again, its last run being `last_run` (nullopt: never): at
  /// most once per minimum interval, since a version made sooner would be held back anyway.
  bool run_due(std::optional<Clock::time_point> last_run, Clock::time_point now) const {
    return !last_run || now - *last_run >= schedule_.min_interval;
  }

  /// How many steps ahead of the job's current step a new version takes effect.
  uint64_t lead_steps(const JobState& job) const;

 private:
  Decider(PolicySettings settings, std::unique_ptr<Policy> policy, VersionSchedule schedule)
      : settings_(std::move(settings)), policy_(std::move(policy)), schedule_(schedule) {}

  PolicySettings settings_;
  std::shared_ptr<const Policy> policy_;
  VersionSchedule schedule_;
};

/// Raw fp32 bytes over predicted wire bytes of one step of the job under `decision`, both from
/// the policies' cost model (what each gateway sends: `none` for raw); 1 when nothing is sent.
double predicted_ratio(const Measurements& measurements, const PolicyDecision& decision);

}  // namespace gradgate::control
