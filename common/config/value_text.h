// Text forms of configuration values that the gateway's and the controller's keys share (numbers,
// booleans, host:port), so that a value means the same in the YAML file, a GRADGATE_* environment
// variable and a --set text.
//
// Every parser takes the text exactly as written and returns the value, or kInvalidArgument with
// a message that quotes the text and says what was expected (the caller prefixes the key path).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/net/endpoint.h"
#include "gradgate/base/status.h"

namespace gradgate::config {

/// A decimal integer in [0, max]: no sign, no spaces, no hex.
Result<uint64_t> parse_unsigned(std::string_view text, uint64_t max);

/// A decimal number in [0, 1): "0", "0.05", "1e-3".
Result<double> parse_fraction(std::string_view text);

/// true | false | 1 | 0.
Result<bool> parse_bool(std::string_view text);

/// "host:port": an IPv4 address or host name (is_host) and a port in 0..65535 (0 = any free
/// port, meaningful for listeners only); kInvalidArgument quotes the text and says what is wrong.
Result<net::Endpoint> parse_endpoint(std::string_view text);

/// `text` in double quotes, as the parsers' messages quote what was written.
std::string quoted(std::string_view text);

}  // namespace gradgate::config
