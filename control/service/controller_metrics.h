// The controller's Prometheus metrics (docs/metrics.md, "Controller"). Labels are bounded: `job`
// by the number of jobs the controller serves (a forgotten job's series are removed), `from`/`to`
// by their sizes, `kind` and `policy` by fixed sets; never a tensor name or a step. Thread-safe.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string_view>
#include <vector>

#include "control/decider/policy_version.h"
#include "control/policy/policy.h"

namespace gradgate::control {

class ControllerMetrics {
 public:
  explicit ControllerMetrics(prometheus::Registry& registry);

  void count_report() { reports_.Increment(); }
  /// `kind`: "malformed" (400), "invalid" (422), "policy" (the policy refused the measurements).
  void count_report_error(std::string_view kind);

  void set_membership(std::size_t jobs, std::size_t live_nodes, std::size_t stale_nodes);
  /// A job's new policy version: its number, ratio and predicted time, one more decision.
  void record_version(uint64_t job_id, const PolicyVersion& version);
  /// One run of a job's policy on its measurements, and how long it took.
  void observe_policy_run(double seconds) { policy_run_seconds_.Observe(seconds); }
  /// How many of the layer rules apply to none of a job's tensors.
  void set_unused_rules(uint64_t job_id, std::size_t count);
  /// The link goodputs a job's policy was given.
  void set_links(uint64_t job_id, const std::vector<LinkSample>& links);
  /// Removes every series of a job the controller forgot.
  void forget_job(uint64_t job_id);

 private:
  /// `family`'s series of `labels`, which name job `job_id`: removed by forget_job (lock held).
  template <typename Metric>
  Metric& job_series_locked(prometheus::Family<Metric>& family, uint64_t job_id,
                            const prometheus::Labels& labels) {
    Metric& metric = family.Add(labels);
    series_[job_id].try_emplace(&metric, [&family, &metric] { family.Remove(&metric); });
    return metric;
  }

  prometheus::Gauge& jobs_;
  prometheus::Family<prometheus::Gauge>& nodes_;
  prometheus::Counter& reports_;
  prometheus::Family<prometheus::Counter>& report_errors_;
  prometheus::Family<prometheus::Gauge>& policy_version_;
  prometheus::Family<prometheus::Counter>& decisions_;
  prometheus::Histogram& policy_run_seconds_;
  prometheus::Family<prometheus::Gauge>& link_bandwidth_;
  prometheus::Family<prometheus::Gauge>& target_ratio_;
  prometheus::Family<prometheus::Gauge>& predicted_communicate_;
  prometheus::Family<prometheus::Gauge>& unused_rules_;
  std::mutex series_mutex_;
  /// By job: how to remove each of its series.
  std::map<uint64_t, std::map<const void*, std::function<void()>>> series_;
};

}  // namespace gradgate::control
