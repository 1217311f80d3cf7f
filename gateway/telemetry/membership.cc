#include "gateway/telemetry/membership.h"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>

#include "common/http/client.h"
#include "common/http/token.h"
#include "gateway/config/config_text.h"

namespace gradgate::gateway {
namespace {

// The smallest report the controller takes: who this gateway is and where it listens.
nlohmann::json registration(const GatewayConfig& config, uint16_t listen_port) {
  return {{"job_id", config.job_id},
          {"node", config.node_rank},
          {"nodes", config.size},
          {"address", config.listen.host + ":" + std::to_string(listen_port)},
          {"admin", ""},
          {"step", 0},
          {"policy_version", 0},
          {"fail_static", false},
          {"links", nlohmann::json::array()},
          {"workers", nlohmann::json::array()},
          {"tensors", nlohmann::json::array()},
          {"codec_speeds", nlohmann::json::array()}};
}

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

}  // namespace

Result<std::string> control_token(const GatewayConfig& config) {
  if (config.control_token_file.empty() && !std::getenv(config.control_token_env.c_str())) {
    return std::string();
  }
  auto token = http::load_token(config.control_token_file, config.control_token_env);
  if (!token.ok()) return Status(token.status().code(), "control: " + token.status().message());
  return token;
}

Result<std::vector<Endpoint>> join_through_controller(
    const GatewayConfig& config, uint16_t listen_port, const std::string& token,
    const std::function<bool(std::chrono::milliseconds)>& pause) {
  http::ClientOptions server;
  GRADGATE_RETURN_IF_ERROR(http::parse_host_port(config.control_url, "control.url", server));
  server.token = token;
  server.timeout = std::chrono::milliseconds(5000);
  const std::string body = registration(config, listen_port).dump();
  const std::string job = "/v1/jobs/" + std::to_string(config.job_id);
  const auto deadline = std::chrono::steady_clock::now() + config.control_join_timeout;
  spdlog::info("joining job {} through the controller at {}: waiting for {} gateways",
               config.job_id, config.control_url, config.size);
  Status last(ErrorCode::kTimeout, "no answer yet");
  while (std::chrono::steady_clock::now() < deadline) {
    // Registering again on every round keeps this gateway live while it waits for the others.
    auto registered = http::send_request(server, http::verb::post, "/v1/nodes", body);
    if (registered.ok() && registered->status == 200) {
      auto answer = http::send_request(server, http::verb::get, job);
      if (answer.ok() && answer->status == 200) {
        const auto listed = nlohmann::json::parse(answer->body, nullptr, false);
        if (!listed.is_discarded()) {
          if (auto members = members_of(listed, config.size)) return *members;
          last = Status(ErrorCode::kUnavailable, "not every gateway has registered yet");
        }
      } else {
        last = answer.ok() ? Status(ErrorCode::kUnavailable,
                                    "GET " + job + " answered " + std::to_string(answer->status))
                           : answer.status();
      }
    } else {
      last = registered.ok() ? Status(ErrorCode::kUnavailable,
                                      "registering answered " + std::to_string(registered->status) +
                                          ": " + registered->body.substr(0, 300))
                             : registered.status();
    }
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
