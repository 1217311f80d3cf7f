// Membership from the controller (job.size instead of job.nodes): a gateway registers its
// transport address with the controller and waits until every gateway of the job has, then dials
// the addresses the controller lists (GET /v1/jobs/{id}). See docs/control.md.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "common/http/client.h"
#include "gateway/config/gateway_config.h"
#include "gateway/transport/endpoint.h"
#include "gradgate/kernels/status.h"

namespace gradgate::gateway {

/// Every gateway's address by rank, once all `config.size` registered with `controller`.
/// `listen_port` is this gateway's bound transport port; `pause(d)` waits between attempts and
/// returns false when the daemon is asked to stop. kTimeout after control.join_timeout_ms,
/// kAborted when stopped.
Result<std::vector<Endpoint>> join_through_controller(
    const GatewayConfig& config, uint16_t listen_port, const http::ClientOptions& controller,
    const std::function<bool(std::chrono::milliseconds)>& pause);

}  // namespace gradgate::gateway
