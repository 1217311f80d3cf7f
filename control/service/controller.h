// The controller's state and what changes it: gateway reports, rank claims, policy settings, the
// traffic budget. Every change re-decides the jobs it touches (Decider) and answers the long polls
// of a job that got a new version. A job's policy runs at most once per the decider's minimum
// interval on reports (the cost of a run grows with nodes x tensors, and every node reports every
// interval); a report that arrives sooner leaves the run pending, and the periodic tick makes it.
// Thread-safe: one lock guards the registry, the rank table, the versions and the decider; HTTP
// handlers read the state through read().
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "control/decider/decider.h"
#include "control/decider/policy_version.h"
#include "control/registry/job_registry.h"
#include "control/registry/node_report.h"
#include "control/registry/rank_table.h"
#include "control/service/controller_metrics.h"
#include "control/service/long_polls.h"
#include "gradgate/base/status.h"

namespace gradgate::control {

/// A job's policy: its latest version and when the policy last ran on its measurements.
struct JobPolicy {
  PolicyVersion latest;  // version 0: none made yet
  std::optional<Clock::time_point> last_run;
  bool run_pending = false;  // reports arrived since the last run
  /// The globs of the layer rules that applied to none of the job's tensors at the last run.
  std::vector<std::string> unused_rules;
};

/// The state a reader sees, consistent as of `now`.
struct ControllerView {
  const JobRegistry& registry;
  const RankTable& ranks;                         // the names that claimed ranks
  const std::map<uint64_t, JobPolicy>& policies;  // by job
  const PolicySettings& settings;
  Clock::time_point now;

  /// The job's latest version; version 0 when nothing was decided yet. Valid while the lock of
  /// read() is held.
  const PolicyVersion& version_of(uint64_t job_id) const;
};

class Controller {
 public:
  /// `metrics` must outlive the controller. Every `refresh_interval` the pending policy runs that
  /// are due are made, the gauges refreshed and the jobs silent for `forget_after` (0: never)
  /// forgotten: their reports, versions, rank claims and series.
  /// At most `max_jobs` jobs with reports, and as many with rank claims, are kept: a further
  /// job's reports or claims are refused until one is forgotten.
  Controller(Decider decider, std::chrono::milliseconds stale_after, ControllerMetrics& metrics,
             std::chrono::milliseconds refresh_interval, std::chrono::milliseconds forget_after,
             uint32_t max_jobs);

  /// Stores a validated report and re-decides its job, now when its policy's last run is at least
  /// the minimum interval old, else at a later tick. Returns the job's latest version;
  /// kUnavailable for a new job when max_jobs are kept.
  Result<uint64_t> report(NodeReport report);

  /// Claims a rank of job `job_id` of `nodes` ranks for `name` (RankTable::claim, with the
  /// job's gateways that report and are not stale). kResourceExhausted, naming the holders,
  /// when every rank is held by another live gateway; kUnavailable for a new job when the table
  /// holds claims of max_jobs jobs.
  Result<uint32_t> claim_rank(uint64_t job_id, const std::string& name, uint32_t nodes);

  /// Called with the new, checked settings before set_settings or set_traffic_budget applies
  /// them, outside the state's lock (reports and long polls go on while it writes: the routes
  /// make changes one at a time on a thread of their own, control/api/routes.h); its error
  /// leaves them as they were (policy.settings_file keeps them across restarts). Not for two
  /// changes at once.
  using SettingsSaver = std::function<Status(const PolicySettings&)>;
  /// Installs `save`; call before serving.
  void save_settings_with(SettingsSaver save) { save_settings_ = std::move(save); }

  /// Replaces the policy settings and re-decides every job; kInvalidArgument naming the setting,
  /// kUnavailable when the saver failed (nothing changed).
  Status set_settings(PolicySettings settings);
  /// Sets (or clears) the traffic budget of the settings, then as set_settings.
  Status set_traffic_budget(std::optional<double> budget);

  /// Calls `answer` once the job has a version above `known_version`, or at `deadline` (on the
  /// long polls' thread, or on this one when the answer is known now). kNotFound for an unknown
  /// job (and `answer` is not called).
  Status when_version_above(uint64_t job_id, uint64_t known_version, Clock::time_point deadline,
                            LongPolls::Answer answer);

  /// Runs `reader` under the lock with a view of the state.
  template <typename Reader>
  auto read(Reader&& reader) const {
    std::lock_guard lock(mutex_);
    return reader(
        ControllerView{registry_, rank_table_, policies_, decider_.settings(), Clock::now()});
  }

  /// Sets the job and node gauges from the registry.
  void refresh_gauges();
  /// Forgets the jobs silent for forget_after, makes the pending policy runs that are due, then
  /// refreshes the gauges.
  void tick();

 private:
  /// Applies `change` to a copy of the settings, checks the result (make_policy), saves it and
  /// applies it, then re-decides every job; one change at a time.
  Status change_settings(const std::function<void(PolicySettings&)>& change);
  /// Re-decides one job (lock held); true when a new version was made.
  bool decide(uint64_t job_id, Clock::time_point now);
  /// decide() when the job's last run is at least the minimum interval old; otherwise marks the
  /// run pending and returns false.
  bool decide_when_due(uint64_t job_id, Clock::time_point now);
  /// Re-decides every job and wakes the long polls of those with a new version.
  void decide_all();
  /// Keeps and counts the layer rules that apply to none of `tensors` (lock held), and warns
  /// when that set changes: a rule whose glob misses the job's tensor names silently does
  /// nothing otherwise.
  void note_unused_rules(uint64_t job_id, JobPolicy& policy,
                         const std::vector<TensorSample>& tensors);

  std::chrono::milliseconds forget_after_;
  uint32_t max_jobs_;
  mutable std::mutex mutex_;
  JobRegistry registry_;
  RankTable rank_table_;
  std::map<uint64_t, JobPolicy> policies_;
  Decider decider_;
  SettingsSaver save_settings_;       // none: the settings live in memory only
  std::mutex settings_change_mutex_;  // held by change_settings, before mutex_ when both
  ControllerMetrics& metrics_;
  LongPolls long_polls_;  // last: its thread uses the members above
};

}  // namespace gradgate::control
