// The listening socket of the ingress: a SOCK_SEQPACKET Unix socket at a path, mode 0660 (the
// node's training processes share a group with the gateway). A stale socket file left by a dead
// gateway (one that refuses connections) is replaced; a live one, another program's socket, or a
// file that is not a socket, is an error.
#pragma once

#include <string>

#include "gradgate/base/status.h"

namespace gradgate::gateway {

/// A non-blocking, listening socket bound to `path`, or why there is none.
Result<int> listen_unix_seqpacket(const std::string& path);

}  // namespace gradgate::gateway
