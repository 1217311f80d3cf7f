// Text forms of the gateway's own configuration values (the modes and kinds of gateway_config.h),
// shared by the YAML file, GRADGATE_* environment variables and --set overrides so that a value
// means the same wherever it is written; those the controller shares are in common/config/
// (numbers, booleans) and common/net/ (host:port).
//
// Every parser takes the text exactly as written and returns the value, or kInvalidArgument with
// a message that quotes the text and says what was expected (the caller prefixes the key path).
#pragma once

#include <cstdint>
#include <string_view>

#include "gateway/config/gateway_config.h"
#include "gradgate/base/status.h"

namespace gradgate::gateway {

/// auto | ring | allgather | aggregator.
Result<CollectiveMode> parse_collective_mode(std::string_view text);

/// auto | gpu | cpu.
Result<PlacementMode> parse_placement_mode(std::string_view text);

/// tcp | dpdk.
Result<TransportKind> parse_transport_kind(std::string_view text);

/// The text form parse_transport_kind reads: "tcp", "dpdk".
std::string_view transport_kind_name(TransportKind kind);

/// The text form parse_collective_mode reads: "auto", "ring", "allgather", "aggregator".
std::string_view collective_mode_name(CollectiveMode mode);

}  // namespace gradgate::gateway
