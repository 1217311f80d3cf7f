// Limits that every part of a job agrees on: what a gateway's configuration accepts, the
// controller's API accepts too.
#pragma once

#include <cstdint>

namespace gradgate {

/// The most gateways (nodes) one job may have; the controller hands out ranks below it.
inline constexpr uint32_t kMaxJobNodes = 65536;

/// The longest a request for a new policy may wait on the controller (a gateway's
/// control.poll_wait_ms, the API's wait_ms).
inline constexpr int64_t kMaxPolicyWaitMs = 60000;

/// The longest message between two gateways: what the TCP transport's length prefix carries next
/// to its control flag (31 bits), and so the most a gateway's transport.max_message_bytes allows.
inline constexpr uint32_t kMaxPeerMessageBytes = (uint32_t{1} << 31) - 1;

}  // namespace gradgate
