// How a TCP connection notices a peer that fell silent without closing it (a node that lost power,
// a partitioned network): nothing arrives, so no read fails, and the kernel retransmits for many
// minutes before it gives up. With a silence limit the kernel sends keepalive probes on an idle
// connection and closes it, like one whose sent bytes go unacknowledged, once nothing has been
// acknowledged for that long (TCP_USER_TIMEOUT); the transport then reports the peer down and
// dials it again.
#pragma once

#include <chrono>

#include <boost/asio/ip/tcp.hpp>

#include "gradgate/kernels/status.h"

namespace gradgate::gateway::tcp {

/// Closes `socket`'s connection once the peer has acknowledged nothing for `limit` (> 0).
/// kUnavailable, with the system's reason, when the options cannot be set.
Status limit_silence(boost::asio::ip::tcp::socket& socket, std::chrono::milliseconds limit);

}  // namespace gradgate::gateway::tcp
