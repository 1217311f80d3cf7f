// The daemon's log: spdlog's level and format (text, or one JSON object per line) from the
// configuration, each line naming the gateway's rank.
#pragma once

#include "gateway/config/gateway_config.h"

namespace gradgate::gateway {

/// Sets spdlog's level and format (text or one JSON object per line) from the config.
void configure_logging(const GatewayConfig& config);

/// The line prefix names config.node_rank ("?" until the controller assigned it).
void set_log_pattern(const GatewayConfig& config);

}  // namespace gradgate::gateway
