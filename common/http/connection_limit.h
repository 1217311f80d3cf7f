// The range of an HTTP server's connection limit (ServerOptions::max_connections), shared by the
// configurations that set it (the controller's server.max_connections, the gateway's
// admin.max_connections) without their pulling in the server.
#pragma once

#include <cstdint>

namespace gradgate::http {

/// The largest connection limit a configuration accepts: each connection is a descriptor, and a
/// process has a few tens of thousands at most.
inline constexpr uint32_t kMaxConnectionsLimit = 65536;

}  // namespace gradgate::http
