// Limits that every part of a job agrees on: what a gateway's configuration accepts, the
// controller's API accepts too.
#pragma once

#include <cstdint>

namespace gradgate {

/// The most gateways (nodes) one job may have; the controller hands out ranks below it.
inline constexpr uint32_t kMaxJobNodes = 65536;

}  // namespace gradgate
