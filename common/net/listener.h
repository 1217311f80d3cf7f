// The listening TCP sockets of our servers (the REST APIs, the gateways' transport), opened the
// same way everywhere: on host:port, where host is an IPv4 address or a host name that resolves
// to one ("localhost", a name in /etc/hosts or in DNS), and port 0 lets the system pick one.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <string>

#include "gradgate/base/status.h"

namespace gradgate::net {

/// A socket listening on `host`:`port` (SO_REUSEADDR set), on `io`; a host name listens on its
/// first IPv4 address. Errors: a host that is neither an IPv4 address nor a host name
/// (kInvalidArgument, without a lookup); a name that does not resolve, or a failure to open, bind
/// (the address in use) or listen (kUnavailable). Messages name the step and the address.
Result<boost::asio::ip::tcp::acceptor> listen_tcp(boost::asio::io_context& io,
                                                  const std::string& host, uint16_t port);

}  // namespace gradgate::net
