#include "control/service/controller.h"

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <set>
#include <vector>

#include "control/policy/layer_rules.h"

namespace gradgate::control {

const PolicyVersion& ControllerView::version_of(uint64_t job_id) const {
  static const PolicyVersion kNone;
  const auto found = policies.find(job_id);
  return found == policies.end() ? kNone : found->second.latest;
}

namespace {

Status too_many_jobs(uint64_t job_id, uint32_t max_jobs) {
  return Status(ErrorCode::kUnavailable,
                "job " + std::to_string(job_id) + " refused: the controller keeps at most " +
                    std::to_string(max_jobs) +
                    " jobs (nodes.max_jobs) until one is forgotten (nodes.forget_after_ms)");
}

}  // namespace

Controller::Controller(Decider decider, std::chrono::milliseconds stale_after,
                       ControllerMetrics& metrics, std::chrono::milliseconds refresh_interval,
                       std::chrono::milliseconds forget_after, uint32_t max_jobs)
    : forget_after_(forget_after),
      max_jobs_(max_jobs),
      registry_(stale_after),
      rank_table_(stale_after),
      decider_(std::move(decider)),
      metrics_(metrics),
      long_polls_([this] { tick(); }, refresh_interval) {}

Result<uint64_t> Controller::report(NodeReport report) {
  const uint64_t job_id = report.job_id;
  const uint32_t node = report.node;
  const std::string address = report.address;
  bool made = false;
  uint64_t latest = 0;
  {
    std::lock_guard lock(mutex_);
    if (registry_.find(job_id) == nullptr && registry_.jobs().size() >= max_jobs_) {
      return too_many_jobs(job_id, max_jobs_);
    }
    const Clock::time_point now = Clock::now();
    const RecordNotes notes = registry_.record(std::move(report), now);
    metrics_.count_report();
    if (notes.new_job) {
      spdlog::info("job {}: first report, from node {} at {}", job_id, node, address);
    }
    if (notes.replaced_address) {
      spdlog::warn("job {} node {}: now at {} (was {}); the newer gateway wins", job_id, node,
                   address, *notes.replaced_address);
    }
    if (notes.resized_from) {
      spdlog::warn("job {}: node {} reports {} nodes (was {}); the newer report wins", job_id, node,
                   registry_.find(job_id)->nodes, *notes.resized_from);
    }
    made = decide_when_due(job_id, now);
    latest = policies_[job_id].latest.version;
  }
  if (made) long_polls_.wake(job_id);
  refresh_gauges();
  return latest;
}

Result<uint32_t> Controller::claim_rank(uint64_t job_id, const std::string& name, uint32_t nodes) {
  std::lock_guard lock(mutex_);
  if (!rank_table_.knows(job_id) && rank_table_.job_count() >= max_jobs_) {
    return too_many_jobs(job_id, max_jobs_);
  }
  const Clock::time_point now = Clock::now();
  std::set<uint32_t> reported_live;
  if (const JobState* job = registry_.find(job_id)) {
    for (const auto& [index, node] : job->members) {
      if (!registry_.is_stale(node, now)) reported_live.insert(index);
    }
  }
  auto claimed = rank_table_.claim(job_id, name, nodes, reported_live, now);
  if (!claimed.ok()) {
    spdlog::info("{} (claimed by {})", claimed.status().message(), name);
    return claimed.status();
  }
  if (claimed->resized_from) {
    spdlog::warn("job {}: {} claims a rank of {} nodes (was {}); the newer claim wins", job_id,
                 name, nodes, *claimed->resized_from);
  }
  if (claimed->took_from) {
    spdlog::info("job {}: rank {} taken over by {} from {}, which is no longer live", job_id,
                 claimed->rank, name, *claimed->took_from);
  } else if (claimed->new_assignment) {
    spdlog::info("job {}: rank {} assigned to {}", job_id, claimed->rank, name);
  }
  return claimed->rank;
}

Status Controller::change_settings(const std::function<void(PolicySettings&)>& change) {
  std::lock_guard one_change(settings_change_mutex_);
  PolicySettings settings = read([](const ControllerView& view) { return view.settings; });
  change(settings);
  if (auto policy = make_policy(settings); !policy.ok()) return policy.status();
  if (save_settings_) {
    if (const Status saved = save_settings_(settings); !saved.ok()) {
      spdlog::error("policy settings not changed: {}", saved.message());
      return Status(ErrorCode::kUnavailable, "the settings could not be saved: " + saved.message());
    }
  }
  {
    std::lock_guard lock(mutex_);
    GRADGATE_RETURN_IF_ERROR(decider_.set_settings(std::move(settings)));
  }
  decide_all();
  return {};
}

Status Controller::set_settings(PolicySettings settings) {
  const std::string name = settings.name;
  GRADGATE_RETURN_IF_ERROR(
      change_settings([&settings](PolicySettings& current) { current = std::move(settings); }));
  spdlog::info("policy settings replaced: policy {}", name);
  return {};
}

Status Controller::set_traffic_budget(std::optional<double> budget) {
  GRADGATE_RETURN_IF_ERROR(
      change_settings([budget](PolicySettings& current) { current.traffic_budget = budget; }));
  spdlog::info("traffic budget {}", budget ? std::to_string(*budget) : "cleared");
  return {};
}

Status Controller::when_version_above(uint64_t job_id, uint64_t known_version,
                                      Clock::time_point deadline, LongPolls::Answer answer) {
  {
    std::lock_guard lock(mutex_);
    if (registry_.find(job_id) == nullptr) {
      return Status(ErrorCode::kNotFound, "job " + std::to_string(job_id) + " is not known");
    }
    const auto policy = policies_.find(job_id);
    const bool newer = policy != policies_.end() && policy->second.latest.version > known_version;
    // Registered under the lock: a version made after this check wakes the waiter.
    if (!newer && deadline > Clock::now()) {
      long_polls_.wait(job_id, deadline, std::move(answer));
      return {};
    }
  }
  answer();
  return {};
}

void Controller::tick() {
  std::vector<uint64_t> woken;
  {
    std::lock_guard lock(mutex_);
    const Clock::time_point now = Clock::now();
    if (forget_after_.count() > 0) {
      for (const uint64_t job_id : registry_.forget_silent(now, forget_after_)) {
        policies_.erase(job_id);
        metrics_.forget_job(job_id);
        spdlog::info("job {}: forgotten, no gateway reported for {} ms (nodes.forget_after_ms)",
                     job_id, forget_after_.count());
      }
      rank_table_.forget_unreported(now - forget_after_, [this](uint64_t job_id) {
        return registry_.find(job_id) != nullptr;
      });
    }
    for (const auto& [job_id, policy] : policies_) {
      if (policy.run_pending && decider_.run_due(policy.last_run, now) && decide(job_id, now)) {
        woken.push_back(job_id);
      }
    }
  }
  for (uint64_t job_id : woken) long_polls_.wake(job_id);
  refresh_gauges();
}

void Controller::refresh_gauges() {
  std::lock_guard lock(mutex_);
  const Clock::time_point now = Clock::now();
  std::size_t live = 0;
  std::size_t stale = 0;
  for (const auto& [job_id, job] : registry_.jobs()) {
    for (const auto& [index, node] : job.members) ++(registry_.is_stale(node, now) ? stale : live);
  }
  metrics_.set_membership(registry_.jobs().size(), live, stale);
}

bool Controller::decide_when_due(uint64_t job_id, Clock::time_point now) {
  JobPolicy& policy = policies_[job_id];
  if (decider_.run_due(policy.last_run, now)) return decide(job_id, now);
  policy.run_pending = true;
  return false;
}

bool Controller::decide(uint64_t job_id, Clock::time_point now) {
  const JobState* job = registry_.find(job_id);
  if (job == nullptr) return false;
  JobPolicy& policy = policies_[job_id];
  policy.last_run = now;
  policy.run_pending = false;
  const auto started = Clock::now();
  const Measurements measurements = registry_.measurements(*job, now);
  metrics_.set_links(job_id, measurements.links);
  note_unused_rules(job_id, policy, measurements.tensors);
  auto next = decider_.decide(*job, measurements, policy.latest, now);
  metrics_.observe_policy_run(std::chrono::duration<double>(Clock::now() - started).count());
  if (!next.ok()) {
    metrics_.count_report_error("policy");
    spdlog::error("job {}: the policy refused the measurements: {}", job_id,
                  next.status().message());
    return false;
  }
  if (!next->has_value()) return false;
  const PolicyVersion& made = **next;
  spdlog::info("job {}: policy version {} ({}), effective at step {}, predicted ratio {:.1f}",
               job_id, made.version, made.policy, made.effective_step, made.target_ratio);
  metrics_.record_version(job_id, made);
  policy.latest = made;
  return true;
}

void Controller::note_unused_rules(uint64_t job_id, JobPolicy& policy,
                                   const std::vector<TensorSample>& tensors) {
  if (tensors.empty()) return;  // no tensor reported yet: every rule would look unused
  std::vector<std::string> unused = unused_layer_rules(decider_.settings().rules, tensors);
  metrics_.set_unused_rules(job_id, unused.size());
  if (unused == policy.unused_rules) return;
  if (!unused.empty()) {
    spdlog::warn(
        "job {}: policy rules {} apply to none of its {} tensors, such as \"{}\": a glob must "
        "match a tensor name as the gateways report it (GET /v1/policy?job_id={} lists them), "
        "and the first rule that matches wins",
        job_id, unused, tensors.size(), tensors.front().name, job_id);
  }
  policy.unused_rules = std::move(unused);
}

void Controller::decide_all() {
  std::vector<uint64_t> woken;
  {
    std::lock_guard lock(mutex_);
    const Clock::time_point now = Clock::now();
    for (const auto& [job_id, job] : registry_.jobs()) {
      if (decide(job_id, now)) woken.push_back(job_id);
    }
  }
  for (uint64_t job_id : woken) long_polls_.wake(job_id);
}

}  // namespace gradgate::control
