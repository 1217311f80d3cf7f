#include "gateway/telemetry/membership.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <optional>

#include "common/http/client.h"
#include "gateway/config/config_text.h"
#include "gateway/telemetry/node_report.h"

namespace gradgate::gateway {
namespace {

// The addresses by rank when every one of the job's gateways is registered and live.
std::optional<std::vector<Endpoint>> members_of(const nlohmann::json& job, uint32_t size) {
  std::vector<Endpoint> members(size);
  uint32_t found = 0;
  for (const auto& node : job.value("nodes", nlohmann::json::array())) {
    const auto rank = node.value("node", size);
    if (rank >= size || node.value("stale", true)) continue;
    auto endpoint = parse_endpoint(node.value("address", ""));
    if (!endpoint.ok() || endpoint->port == 0) continue;
    members[rank] = *endpoint;
    ++found;
  }
  if (found != size) return std::nullopt;
  return members;
}

// Registers `registration` and lists the job `job` (a GET target): its members once all `size`
// are there, kUnavailable (saying why not) otherwise.
Result<std::vector<Endpoint>> register_and_list(const http::ClientOptions& controller,
                                                const std::string& registration,
                                                const std::string& job, uint32_t size) {
  auto registered = http::send_request(controller, http::verb::post, "/v1/nodes", registration);
  if (!registered.ok()) return registered.status();
  GRADGATE_RETURN_IF_ERROR(http::expect_ok(*registered, "registering with the controller"));
  auto answer = http::send_request(controller, http::verb::get, job);
  if (!answer.ok()) return answer.status();
  GRADGATE_RETURN_IF_ERROR(http::expect_ok(*answer, "GET " + job));
  const auto listed = nlohmann::json::parse(answer->body, nullptr, false);
  if (auto members = listed.is_discarded() ? std::nullopt : members_of(listed, size)) {
    return *members;
  }
  return Status(ErrorCode::kUnavailable, "not every gateway has registered yet");
}

}  // namespace

Result<std::vector<Endpoint>> join_through_controller(
    const GatewayConfig& config, uint16_t listen_port, const http::ClientOptions& controller,
    const std::function<bool(std::chrono::milliseconds)>& pause) {
  const NodeIdentity self{config.job_id, config.node_rank, config.size,
                          config.listen.host + ":" + std::to_string(listen_port), ""};
  const std::string body = NodeReport::registration(self).dump();
  const std::string job = "/v1/jobs/" + std::to_string(config.job_id);
  const auto deadline = std::chrono::steady_clock::now() + config.control_join_timeout;
  spdlog::info("joining job {} through the controller at {}: waiting for {} gateways",
               config.job_id, config.controller.to_string(), config.size);
  Status last(ErrorCode::kTimeout, "no answer yet");
  while (std::chrono::steady_clock::now() < deadline) {
    // Registering again on every round keeps this gateway live while it waits for the others.
    auto members = register_and_list(controller, body, job, config.size);
    if (members.ok()) return members;
    last = members.status();
    if (!pause(config.control_report_interval)) {
      return Status(ErrorCode::kAborted, "stopped while joining the job");
    }
  }
  return Status(ErrorCode::kTimeout,
                "control.join_timeout_ms passed before every gateway of job " +
                    std::to_string(config.job_id) +
                    " registered with the controller (last: " + last.to_string() + ")");
}

}  // namespace gradgate::gateway
