// Membership from the controller (job.size instead of job.nodes): a gateway registers its
// transport address with the controller and waits until every gateway of the job has, then dials
// the addresses the controller lists (GET /v1/jobs/{id}). With `job.node_rank: auto` it first
// claims its rank from the controller by name. A gateway that restarts registers its new address,
// and the others, listing the job again while they miss it, dial it there. See docs/control.md.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "common/http/client.h"
#include "common/net/endpoint.h"
#include "gateway/config/gateway_config.h"
#include "gradgate/base/status.h"

namespace gradgate::gateway {

/// Waits up to the given time between attempts; false when the daemon is asked to stop.
using Pause = std::function<bool(std::chrono::milliseconds)>;

/// The name this gateway claims its rank under: job.node_name, or the host name.
std::string node_name_of(const GatewayConfig& config);

/// This gateway's rank when `job.node_rank` is auto: claimed from `controller` under
/// node_name_of(config) (POST /v1/jobs/{id}/ranks); the same name gets the same rank back, so a
/// restarted gateway keeps its place. Retried while the controller is unreachable or every rank
/// is held by a live gateway; kTimeout after control.join_timeout_ms, kAborted when stopped.
Result<uint32_t> claim_rank_through_controller(const GatewayConfig& config,
                                               const http::ClientOptions& controller,
                                               const Pause& pause);

/// Every gateway's address by rank, once all `config.size` registered with `controller`.
/// `listen_port` is this gateway's bound transport port; `pause(d)` waits between attempts and
/// returns false when the daemon is asked to stop. kTimeout after control.join_timeout_ms,
/// kAborted when stopped.
Result<std::vector<net::Endpoint>> join_through_controller(const GatewayConfig& config,
                                                           uint16_t listen_port,
                                                           const http::ClientOptions& controller,
                                                           const Pause& pause);

/// The addresses by rank of the job's gateways that are registered and live now (an empty host
/// for the others): one GET /v1/jobs/{id}.
Result<std::vector<net::Endpoint>> live_members_through_controller(
    const GatewayConfig& config, const http::ClientOptions& controller);

}  // namespace gradgate::gateway
