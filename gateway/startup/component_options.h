// Each component's part of the gateway's configuration: the core, the transports, the telemetry
// and the membership through the controller are made from these, never from the whole
// GatewayConfig.
#pragma once

#include "common/http/client.h"
#include "gateway/config/gateway_config.h"
#include "gateway/core/gateway.h"
#include "gateway/telemetry/membership.h"
#include "gateway/telemetry/telemetry.h"
#include "gateway/transport/tcp_transport.h"
#include "gradgate/base/status.h"
#include "gradgate/config.h"
#if GRADGATE_HAVE_DPDK
#include "gateway/transport/dpdk_transport.h"
#endif

namespace gradgate::gateway {

/// The core's: the job's shape, codecs and their memory, the step timeout.
Gateway::Options core_options(const GatewayConfig& config);

/// The TCP transport's: the job's peers and the transport.* keys. resolve_peers is left unset
/// (the daemon sets it when the addresses come from the controller).
TcpTransportOptions tcp_options(const GatewayConfig& config);

#if GRADGATE_HAVE_DPDK
/// The DPDK transport's: the peers (on dpdk.udp_port when set) and the dpdk.* keys.
DpdkTransportOptions dpdk_options(const GatewayConfig& config);
#endif

/// How to reach the controller: control.url, the bearer token of control.token_file or
/// control.token_env, control.request_timeout_ms per request.
Result<http::ClientOptions> controller_options(const GatewayConfig& config);

/// Membership through the controller (job.size, job.node_rank: auto): the job, this gateway's
/// rank, name (job.node_name or the host name) and transport host, the control.* timings.
Result<MembershipOptions> membership_options(const GatewayConfig& config);

/// The telemetry's: the job's identity, admin.*, and with control.url the controller's options
/// (with job.size, the membership's too).
Result<Telemetry::Options> telemetry_options(const GatewayConfig& config);

}  // namespace gradgate::gateway
