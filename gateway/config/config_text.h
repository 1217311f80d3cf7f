// Text forms of configuration values, shared by the YAML file, GRADGATE_* environment variables
// and --set overrides so that a value means the same wherever it is written.
//
// Every parser takes the text exactly as written and returns the value, or kInvalidArgument with
// a message that quotes the text and says what was expected (the caller prefixes the key path).
#pragma once

#include <cstdint>
#include <string_view>

#include "gateway/config/gateway_config.h"
#include "gateway/transport/endpoint.h"
#include "gradgate/base/status.h"

namespace gradgate::gateway {

/// A decimal integer in [0, max]: no sign, no spaces, no hex.
Result<uint64_t> parse_unsigned(std::string_view text, uint64_t max);

/// A decimal number in [0, 1): "0", "0.05", "1e-3".
Result<double> parse_fraction(std::string_view text);

/// true | false | 1 | 0.
Result<bool> parse_bool(std::string_view text);

/// "host:port": an IPv4 address or host name (letters, digits, '.', '-', '_') and a port in
/// 0..65535 (0 = any free port, meaningful for listeners only).
Result<Endpoint> parse_endpoint(std::string_view text);

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
