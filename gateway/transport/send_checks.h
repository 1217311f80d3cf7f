// The argument checks every Transport::send() makes before looking at its peer, shared by the
// fabrics so that they refuse the same calls with the same errors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "gateway/transport/transport.h"

namespace gradgate::gateway {

/// kInvalidArgument for a rank outside [0, world) or equal to `own_rank`, and for a message that
/// is null, empty or over `max_message_bytes`.
inline Status check_send(uint32_t to_rank, uint32_t own_rank, std::size_t world,
                         const Message& message, uint64_t max_message_bytes) {
  if (to_rank >= world || to_rank == own_rank) {
    return Status(ErrorCode::kInvalidArgument,
                  "transport: cannot send to rank " + std::to_string(to_rank) + " (own rank " +
                      std::to_string(own_rank) + ", " + std::to_string(world) + " peers)");
  }
  if (!message || message->empty() || message->size() > max_message_bytes) {
    return Status(ErrorCode::kInvalidArgument,
                  "transport: message of " + std::to_string(message ? message->size() : 0) +
                      " bytes to rank " + std::to_string(to_rank) + " is outside [1, " +
                      std::to_string(max_message_bytes) + "]");
  }
  return {};
}

}  // namespace gradgate::gateway
