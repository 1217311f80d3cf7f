#include "gateway/startup/job_joining.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <string>
#include <utility>

#include "common/config/config_source.h"
#include "gateway/config/network_status.h"
#include "gateway/startup/component_options.h"
#include "gateway/startup/logging.h"
#include "gateway/startup/stop_signals.h"
#include "gateway/telemetry/membership.h"

namespace gradgate::gateway {
namespace {

// How often a gateway looks again for its network in the pod's network-status.
constexpr std::chrono::milliseconds kNetworkStatusPoll{500};

}  // namespace

Status claim_rank(GatewayConfig& config) {
  auto membership = membership_options(config);
  if (!membership.ok()) return membership.status();
  auto rank = claim_rank_through_controller(*membership, pause_unless_stopped);
  if (!rank.ok()) return rank.status();
  config.node_rank = *rank;
  config.node_rank_auto = false;
  set_log_pattern(config);
  return {};
}

Status take_dpdk_attachment(GatewayConfig& config) {
  const std::string& path = config.dpdk_network_status_file;
  const auto deadline = std::chrono::steady_clock::now() + config.dpdk_network_wait;
  for (bool waiting = false;; waiting = true) {
    // A file that is missing or unreadable is a mistake of the pod's spec: no use waiting.
    auto text = config::read_config_file(path, "dpdk.network_status_file");
    if (!text.ok()) return Status(ErrorCode::kInvalidArgument, text.status().message());
    auto attachment = find_dpdk_attachment(*text, config.dpdk_network);
    if (attachment.ok()) {
      config.listen.host = attachment->ipv4;
      if (config.dpdk_port.empty()) config.dpdk_port = attachment->port;
      spdlog::info("dpdk: network {} gives address {}, port {}", attachment->name, attachment->ipv4,
                   config.dpdk_port);
      return {};
    }
    const Status& missing = attachment.status();
    if (missing.code() != ErrorCode::kNotFound) {
      return Status(missing.code(), path + ": " + missing.message());
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status(ErrorCode::kTimeout, path + ": " + missing.message() + " after " +
                                             std::to_string(config.dpdk_network_wait.count()) +
                                             " ms (dpdk.network_wait_ms)");
    }
    if (!waiting) spdlog::info("dpdk: waiting for {}: {}", path, missing.message());
    if (!pause_unless_stopped(kNetworkStatusPoll)) {
      return Status(ErrorCode::kAborted, "stopped while waiting for the network-status");
    }
  }
}

Status join_for_dpdk(GatewayConfig& config) {
  auto membership = membership_options(config);
  if (!membership.ok()) return membership.status();
  auto nodes = join_through_controller(*membership, static_cast<uint16_t>(config.dpdk_udp_port),
                                       pause_unless_stopped);
  if (!nodes.ok()) return nodes.status();
  config.nodes = std::move(nodes).value();
  return {};
}

}  // namespace gradgate::gateway
