// A peer or listen address as written in configs and logs: "host:port". The transport dials and
// listens on them; the gateway's and the controller's configurations read them.
#pragma once

#include <arpa/inet.h>

#include <cstdint>
#include <string>

namespace gradgate::net {

/// A host and port (IPv4 address or host name; port 0 = any free port, for listeners only).
struct Endpoint {
  std::string host;
  uint16_t port = 0;

  std::string to_string() const { return host + ":" + std::to_string(port); }
  bool operator==(const Endpoint&) const = default;
};

/// A dotted IPv4 address other than 0.0.0.0: what the DPDK transport sends from and to.
inline bool is_ipv4_address(const std::string& host) {
  in_addr address{};
  return inet_pton(AF_INET, host.c_str(), &address) == 1 && address.s_addr != 0;
}

}  // namespace gradgate::net
