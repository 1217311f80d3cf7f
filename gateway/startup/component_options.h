// Each component's part of the gateway's configuration: the core, the TCP transport and the DPDK
// transport are made from these, never from the whole GatewayConfig.
#pragma once

#include "gateway/config/gateway_config.h"
#include "gateway/core/gateway.h"
#include "gateway/transport/tcp_transport.h"
#include "gradgate/config.h"
#if GRADGATE_HAVE_DPDK
#include "gateway/transport/dpdk_transport.h"
#endif

namespace gradgate::gateway {

/// The core's: codecs and their memory, the job's shape, the step timeout.
Gateway::Options core_options(const GatewayConfig& config);

/// The TCP transport's: the job's peers and the transport.* keys. resolve_peers is left unset
/// (the daemon sets it when the addresses come from the controller).
TcpTransportOptions tcp_options(const GatewayConfig& config);

#if GRADGATE_HAVE_DPDK
/// The DPDK transport's: the peers (on dpdk.udp_port when set) and the dpdk.* keys.
DpdkTransportOptions dpdk_options(const GatewayConfig& config);
#endif

}  // namespace gradgate::gateway
