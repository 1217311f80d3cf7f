#include "control/api/views.h"

#include <algorithm>

#include "gradgate/kernels/codec_spec.h"

namespace gradgate::control {
namespace {

double age_seconds(const ControllerView& view, const NodeState& node) {
  return std::chrono::duration<double>(view.now - node.last_seen).count();
}

// A node's membership; `name` when a name claimed its rank (POST /v1/jobs/{id}/ranks).
nlohmann::json member_json(const ControllerView& view, const NodeState& node) {
  nlohmann::json json = {{"node", node.report.node},
                         {"address", node.report.address},
                         {"admin", node.report.admin},
                         {"stale", view.registry.is_stale(node, view.now)},
                         {"age_seconds", age_seconds(view, node)}};
  if (const std::string* name = view.ranks.holder_of(node.report.job_id, node.report.node)) {
    json["name"] = *name;
  }
  return json;
}

nlohmann::json node_json(const ControllerView& view, const NodeState& node) {
  nlohmann::json json = member_json(view, node);
  json["job_id"] = node.report.job_id;
  json["step"] = node.report.step;
  json["policy_version"] = node.report.policy_version;
  json["fail_static"] = node.report.fail_static;
  return json;
}

// The jobs `job_id` selects: one, or all when unset.
template <typename Visit>
void for_jobs(const ControllerView& view, std::optional<uint64_t> job_id, Visit visit) {
  for (const auto& [id, job] : view.registry.jobs()) {
    if (!job_id || *job_id == id) visit(id, job);
  }
}

// The top-k density of a codec spec; nullopt for other codecs.
std::optional<double> topk_density(const std::string& spec) {
  auto codec = kernels::parse_codec_spec(spec);
  if (!codec.ok() || codec->id != CodecId::kTopk) return std::nullopt;
  return codec->density;
}

}  // namespace

nlohmann::json jobs_json(const ControllerView& view) {
  nlohmann::json jobs = nlohmann::json::array();
  for_jobs(view, std::nullopt, [&](uint64_t id, const JobState& job) {
    const auto stale = std::count_if(job.members.begin(), job.members.end(), [&](const auto& m) {
      return view.registry.is_stale(m.second, view.now);
    });
    jobs.push_back({{"job_id", id},
                    {"nodes", job.nodes},
                    {"registered", job.members.size()},
                    {"stale", stale},
                    {"step", JobRegistry::max_step(job)},
                    {"policy_version", view.version_of(id).version}});
  });
  return {{"jobs", std::move(jobs)}};
}

std::optional<nlohmann::json> job_json(const ControllerView& view, uint64_t job_id) {
  const JobState* job = view.registry.find(job_id);
  if (job == nullptr) return std::nullopt;
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& [index, node] : job->members) nodes.push_back(member_json(view, node));
  const auto policy = view.policies.find(job_id);
  return nlohmann::json{
      {"job_id", job_id},
      {"size", job->nodes},
      {"step", JobRegistry::max_step(*job)},
      {"policy_version", view.version_of(job_id).version},
      {"unused_rules",
       policy == view.policies.end() ? std::vector<std::string>{} : policy->second.unused_rules},
      {"nodes", std::move(nodes)}};
}

nlohmann::json nodes_json(const ControllerView& view, std::optional<uint64_t> job_id) {
  nlohmann::json nodes = nlohmann::json::array();
  for_jobs(view, job_id, [&](uint64_t, const JobState& job) {
    for (const auto& [index, node] : job.members) nodes.push_back(node_json(view, node));
  });
  return {{"nodes", std::move(nodes)}};
}

nlohmann::json links_json(const ControllerView& view, std::optional<uint64_t> job_id) {
  nlohmann::json links = nlohmann::json::array();
  for_jobs(view, job_id, [&](uint64_t id, const JobState& job) {
    for (const auto& [index, node] : job.members) {
      for (const LinkReport& link : node.report.links) {
        links.push_back({{"job_id", id},
                         {"from", link.peer},
                         {"to", index},
                         {"goodput_bytes_per_second", link.goodput_bytes_per_second},
                         {"rtt_seconds", link.rtt_seconds},
                         {"age_seconds", link.age_seconds + age_seconds(view, node)}});
      }
    }
  });
  return {{"links", std::move(links)}};
}

nlohmann::json policy_json(uint64_t job_id, const PolicyVersion& version,
                           std::optional<uint32_t> node) {
  nlohmann::json tensors = nlohmann::json::array();
  for (const TensorDecision& tensor : version.tensors) {
    const std::vector<std::string>& codecs = tensor.codec_per_node;
    // A node beyond the decision (the job shrank after the request) gets node 0's codec.
    const std::size_t index = node && *node < codecs.size() ? *node : 0;
    nlohmann::json json = {{"name", tensor.tensor},
                           {"codec", codecs.empty() ? "none" : codecs[index]},
                           {"reason", tensor.reason}};
    if (!node) json["codec_per_node"] = codecs;
    tensors.push_back(std::move(json));
  }
  nlohmann::json policy = {
      {"job_id", job_id},
      {"version", version.version},
      {"effective_step", version.effective_step},
      {"policy", version.policy},
      {"tensors", std::move(tensors)},
      {"default_codec",
       version.version > 0 ? nlohmann::json(version.default_codec) : nlohmann::json(nullptr)},
      {"predicted_communicate_seconds", version.predicted_communicate_seconds
                                            ? nlohmann::json(*version.predicted_communicate_seconds)
                                            : nlohmann::json(nullptr)},
      {"target_ratio", version.target_ratio}};
  if (node) policy["node"] = *node;
  return policy;
}

nlohmann::json budget_json(const ControllerView& view, uint64_t job_id) {
  nlohmann::json nodes = nlohmann::json::array();
  const JobState* job = view.registry.find(job_id);
  const PolicyVersion& version = view.version_of(job_id);
  for (uint32_t index = 0; job != nullptr && index < job->nodes; ++index) {
    const auto member = job->members.find(index);
    double volume = 0.0;
    if (member != job->members.end()) {
      for (const WorkerReport& worker : member->second.report.workers) volume += worker.data_volume;
    }
    // The mean top-k density of the node over the tensors sent with top-k.
    double density_sum = 0.0;
    int topk_tensors = 0;
    for (const TensorDecision& tensor : version.tensors) {
      if (index >= tensor.codec_per_node.size()) continue;
      if (auto density = topk_density(tensor.codec_per_node[index])) {
        density_sum += *density;
        ++topk_tensors;
      }
    }
    nodes.push_back({{"node", index},
                     {"data_volume", volume},
                     {"keep_fraction", topk_tensors ? nlohmann::json(density_sum / topk_tensors)
                                                    : nlohmann::json(nullptr)}});
  }
  return {{"job_id", job_id},
          {"traffic_budget", view.settings.traffic_budget
                                 ? nlohmann::json(*view.settings.traffic_budget)
                                 : nlohmann::json(nullptr)},
          {"nodes", std::move(nodes)}};
}

}  // namespace gradgate::control
