// What a gateway learns before it can make its transport, filled into its configuration: the rank
// the controller assigns (job.node_rank: auto), its DPDK address from the pod's network-status,
// and with DPDK and job.size, every peer's address. Each waits (stop signals end the wait).
#pragma once

#include "gateway/config/gateway_config.h"
#include "gradgate/base/status.h"

namespace gradgate::gateway {

/// `job.node_rank: auto`: takes the rank the controller assigns to this node's name.
Status claim_rank(GatewayConfig& config);

/// Kubernetes: this gateway's address on its DPDK port, and the port unless dpdk.port names one,
/// from the pod's network-status. The kubelet refreshes the annotations file some time after the
/// start, so a network not listed yet is waited for, up to dpdk.network_wait_ms.
Status take_dpdk_attachment(GatewayConfig& config);

/// DPDK with job.size: the transport needs every peer's address when it is made, so they come
/// from the controller first (this gateway registers transport.listen's host and dpdk.udp_port).
Status join_for_dpdk(GatewayConfig& config);

}  // namespace gradgate::gateway
