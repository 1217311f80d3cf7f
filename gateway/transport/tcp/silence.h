// The kernel's part in noticing a peer that fell silent without closing the connection (a node
// that lost power, a partitioned network): by default the kernel retransmits unacknowledged
// bytes for many minutes before it gives up. With a limit it closes the connection once bytes it
// sent stay unacknowledged for that long (TCP_USER_TIMEOUT, tcp(7)). A slow link does not trip
// it: there bytes are acknowledged, only slowly. No keep-alive probes are needed: the transport
// writes heartbeats on idle connections itself, and watches what arrives (tcp_transport.h).
#pragma once

#include <chrono>

#include <boost/asio/ip/tcp.hpp>

#include "gradgate/base/status.h"

namespace gradgate::gateway::tcp {

/// Closes `socket`'s connection once bytes it sent stay unacknowledged for `limit` (> 0).
/// kUnavailable, with the system's reason, when the option cannot be set.
Status limit_unacknowledged(boost::asio::ip::tcp::socket& socket, std::chrono::milliseconds limit);

}  // namespace gradgate::gateway::tcp
