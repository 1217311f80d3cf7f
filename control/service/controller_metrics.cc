#include "control/service/controller_metrics.h"

#include <string>

namespace gradgate::control {
namespace {

prometheus::Family<prometheus::Gauge>& gauge(prometheus::Registry& registry, const char* name,
                                             const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry);
}

prometheus::Family<prometheus::Counter>& counter(prometheus::Registry& registry, const char* name,
                                                 const char* help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
}

}  // namespace

ControllerMetrics::ControllerMetrics(prometheus::Registry& registry)
    : jobs_(gauge(registry, "gradgate_controller_jobs", "Jobs known to the controller").Add({})),
      nodes_(gauge(registry, "gradgate_controller_nodes",
                   "Registered gateways, live or stale (silent for nodes.stale_after_ms)")),
      reports_(counter(registry, "gradgate_controller_reports_total",
                       "Gateway reports accepted (POST /v1/nodes)")
                   .Add({})),
      report_errors_(counter(registry, "gradgate_controller_report_errors_total",
                             "Gateway reports refused or not usable, by kind")),
      policy_version_(
          gauge(registry, "gradgate_controller_policy_version", "Latest policy version of a job")),
      decisions_(counter(registry, "gradgate_controller_decisions_total",
                         "Policy versions made, by job and policy")),
      policy_run_seconds_(
          prometheus::BuildHistogram()
              .Name("gradgate_controller_policy_run_seconds")
              .Help("Runs of a job's policy on its measurements, by duration")
              .Register(registry)
              .Add({}, prometheus::Histogram::BucketBoundaries{0.0001, 0.001, 0.01, 0.1, 1, 10})),
      link_bandwidth_(gauge(registry, "gradgate_controller_link_bandwidth_bytes_per_second",
                            "Measured goodput of the link from one gateway to another")),
      target_ratio_(gauge(registry, "gradgate_controller_target_ratio",
                          "Raw over wire bytes per step predicted by a job's policy version")),
      predicted_communicate_(gauge(registry, "gradgate_controller_predicted_communicate_seconds",
                                   "Wire seconds per step predicted by a job's policy version")),
      unused_rules_(gauge(registry, "gradgate_controller_unused_rules",
                          "Layer rules of the policy that apply to none of a job's tensors")) {
  nodes_.Add({{"state", "live"}});
  nodes_.Add({{"state", "stale"}});
}

void ControllerMetrics::count_report_error(std::string_view kind) {
  report_errors_.Add({{"kind", std::string(kind)}}).Increment();
}

void ControllerMetrics::set_membership(std::size_t jobs, std::size_t live_nodes,
                                       std::size_t stale_nodes) {
  jobs_.Set(static_cast<double>(jobs));
  nodes_.Add({{"state", "live"}}).Set(static_cast<double>(live_nodes));
  nodes_.Add({{"state", "stale"}}).Set(static_cast<double>(stale_nodes));
}

void ControllerMetrics::record_version(uint64_t job_id, const PolicyVersion& version) {
  const std::string job = std::to_string(job_id);
  std::lock_guard lock(series_mutex_);
  job_series_locked(policy_version_, job_id, {{"job_id", job}})
      .Set(static_cast<double>(version.version));
  job_series_locked(decisions_, job_id, {{"job_id", job}, {"policy", version.policy}}).Increment();
  job_series_locked(target_ratio_, job_id, {{"job_id", job}}).Set(version.target_ratio);
  if (version.predicted_communicate_seconds) {
    job_series_locked(predicted_communicate_, job_id, {{"job_id", job}})
        .Set(*version.predicted_communicate_seconds);
  }
}

void ControllerMetrics::set_unused_rules(uint64_t job_id, std::size_t count) {
  std::lock_guard lock(series_mutex_);
  job_series_locked(unused_rules_, job_id, {{"job_id", std::to_string(job_id)}})
      .Set(static_cast<double>(count));
}

void ControllerMetrics::set_links(uint64_t job_id, const std::vector<LinkSample>& links) {
  const std::string job = std::to_string(job_id);
  std::lock_guard lock(series_mutex_);
  for (const LinkSample& link : links) {
    job_series_locked(link_bandwidth_, job_id,
                      {{"job_id", job},
                       {"from", std::to_string(link.from_node)},
                       {"to", std::to_string(link.to_node)}})
        .Set(link.goodput_bytes_per_second);
  }
}

void ControllerMetrics::forget_job(uint64_t job_id) {
  std::lock_guard lock(series_mutex_);
  const auto found = series_.find(job_id);
  if (found == series_.end()) return;
  for (const auto& [metric, remove] : found->second) remove();
  series_.erase(found);
}

}  // namespace gradgate::control
