#include "gateway/telemetry/membership.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "common/config/value_text.h"
#include "common/http/client.h"
#include "gateway/telemetry/node_report.h"

namespace gradgate::gateway {
namespace {

// An unsigned integer member of a JSON object, or nothing (absent, another type, not an object).
std::optional<uint64_t> unsigned_member(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return std::nullopt;
  const auto found = object.find(key);
  if (found == object.end() || !found->is_number_unsigned()) return std::nullopt;
  return found->get<uint64_t>();
}

// The addresses by rank of the job's registered, live gateways (an empty host where none is).
std::vector<net::Endpoint> live_members(const nlohmann::json& job, uint32_t size) {
  std::vector<net::Endpoint> members(size);
  if (!job.is_object() || !job.contains("nodes") || !job["nodes"].is_array()) return members;
  for (const auto& node : job["nodes"]) {
    const auto rank = unsigned_member(node, "node").value_or(size);
    const auto stale = node.find("stale");
    if (rank >= size || stale == node.end() || *stale != false) continue;
    const auto address = node.find("address");
    if (address == node.end() || !address->is_string()) continue;
    auto endpoint = config::parse_endpoint(address->get<std::string>());
    if (!endpoint.ok() || endpoint->port == 0 || !members[rank].host.empty()) continue;
    members[rank] = *endpoint;
  }
  return members;
}

// GET `job` from the controller, parsed.
Result<nlohmann::json> list_job(const http::ClientOptions& controller, const std::string& job) {
  auto answer = http::send_request(controller, http::verb::get, job);
  if (!answer.ok()) return answer.status();
  GRADGATE_RETURN_IF_ERROR(http::expect_ok(*answer, "GET " + job));
  auto listed = nlohmann::json::parse(answer->body, nullptr, false);
  if (listed.is_discarded()) {
    return Status(ErrorCode::kUnavailable, "GET " + job + " answered no JSON");
  }
  return listed;
}

std::string job_target(const MembershipOptions& options) {
  return "/v1/jobs/" + std::to_string(options.job_id);
}

std::string address_of(const http::ClientOptions& controller) {
  return net::Endpoint{controller.host, controller.port}.to_string();
}

// Registers `registration` and lists the job `job` (a GET target): its members once all `size`
// are there, kUnavailable (saying why not) otherwise.
Result<std::vector<net::Endpoint>> register_and_list(const http::ClientOptions& controller,
                                                     const std::string& registration,
                                                     const std::string& job, uint32_t size) {
  auto registered = http::send_request(controller, http::verb::post, "/v1/nodes", registration);
  if (!registered.ok()) return registered.status();
  GRADGATE_RETURN_IF_ERROR(http::expect_ok(*registered, "registering with the controller"));
  auto listed = list_job(controller, job);
  if (!listed.ok()) return listed.status();
  auto members = live_members(*listed, size);
  if (std::none_of(members.begin(), members.end(),
                   [](const net::Endpoint& member) { return member.host.empty(); })) {
    return members;
  }
  return Status(ErrorCode::kUnavailable, "not every gateway has registered yet");
}

// Runs `attempt` every retry_interval until it succeeds, the daemon stops (kAborted) or
// join_timeout passes (kTimeout: `waiting_for`, and the last failure).
template <typename T>
Result<T> retry_until_join_timeout(const MembershipOptions& options, const Pause& pause,
                                   const std::string& waiting_for,
                                   const std::function<Result<T>()>& attempt) {
  const auto deadline = std::chrono::steady_clock::now() + options.join_timeout;
  Status last(ErrorCode::kTimeout, "no answer yet");
  while (std::chrono::steady_clock::now() < deadline) {
    auto result = attempt();
    if (result.ok()) return result;
    last = result.status();
    if (!pause(options.retry_interval)) {
      return Status(ErrorCode::kAborted, "stopped while " + waiting_for);
    }
  }
  return Status(ErrorCode::kTimeout, "control.join_timeout_ms passed while " + waiting_for +
                                         " (last: " + last.to_string() + ")");
}

}  // namespace

Result<uint32_t> claim_rank_through_controller(const MembershipOptions& options,
                                               const Pause& pause) {
  const std::string& name = options.node_name;
  const std::string body = nlohmann::json{{"name", name}, {"nodes", options.size}}.dump();
  const std::string target = job_target(options) + "/ranks";
  spdlog::info("job {}: claiming a rank as \"{}\" from the controller at {}", options.job_id, name,
               address_of(options.controller));
  auto rank = retry_until_join_timeout<uint32_t>(
      options, pause, "claiming a rank of job " + std::to_string(options.job_id),
      [&]() -> Result<uint32_t> {
        auto answer = http::send_request(options.controller, http::verb::post, target, body);
        if (!answer.ok()) return answer.status();
        GRADGATE_RETURN_IF_ERROR(http::expect_ok(*answer, "POST " + target));
        const auto claimed = nlohmann::json::parse(answer->body, nullptr, false);
        const auto node = unsigned_member(claimed, "node");
        if (!node || *node >= options.size) {
          return Status(ErrorCode::kUnavailable, "POST " + target + " gave no rank below " +
                                                     std::to_string(options.size) + ": " +
                                                     answer->body.substr(0, 200));
        }
        return static_cast<uint32_t>(*node);
      });
  if (rank.ok()) spdlog::info("job {}: rank {} as \"{}\"", options.job_id, *rank, name);
  return rank;
}

Result<std::vector<net::Endpoint>> join_through_controller(const MembershipOptions& options,
                                                           uint16_t listen_port,
                                                           const Pause& pause) {
  const NodeIdentity self{options.job_id, options.node_rank, options.size,
                          options.listen_host + ":" + std::to_string(listen_port), ""};
  const std::string body = NodeReport::registration(self).dump();
  const std::string job = job_target(options);
  spdlog::info("joining job {} through the controller at {}: waiting for {} gateways",
               options.job_id, address_of(options.controller), options.size);
  // Registering again on every round keeps this gateway live while it waits for the others.
  return retry_until_join_timeout<std::vector<net::Endpoint>>(
      options, pause,
      "waiting for every gateway of job " + std::to_string(options.job_id) +
          " to register with the controller",
      [&] { return register_and_list(options.controller, body, job, options.size); });
}

Result<std::vector<net::Endpoint>> live_members_through_controller(
    const MembershipOptions& options) {
  auto listed = list_job(options.controller, job_target(options));
  if (!listed.ok()) return listed.status();
  return live_members(*listed, options.size);
}

}  // namespace gradgate::gateway
