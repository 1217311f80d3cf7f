// A peer or listen address as written in configs and logs: "host:port".
#pragma once

#include <cstdint>
#include <string>

namespace gradgate::gateway {

/// A host and port (IPv4 address or host name; port 0 = any free port, for listeners only).
struct Endpoint {
  std::string host;
  uint16_t port = 0;

  std::string to_string() const { return host + ":" + std::to_string(port); }
  bool operator==(const Endpoint&) const = default;
};

}  // namespace gradgate::gateway
