#include "common/config/value_text.h"

#include <charconv>
#include <limits>
#include <string>
#include <utility>

#include "common/net/host_name.h"

namespace gradgate::config {
namespace {

Status invalid(std::string message) {
  return Status(ErrorCode::kInvalidArgument, std::move(message));
}

}  // namespace

std::string quoted(std::string_view text) {
  std::string out(1, '"');
  out.append(text);
  out += '"';
  return out;
}

Result<uint64_t> parse_unsigned(std::string_view text, uint64_t max) {
  uint64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && ptr == end && value > max)) {
    return invalid(quoted(text) + " is out of range 0.." + std::to_string(max));
  }
  if (ec != std::errc() || ptr != end) {
    return invalid("must be a non-negative integer, got " + quoted(text));
  }
  return value;
}

Result<double> parse_fraction(std::string_view text) {
  double value = 0.0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end) return invalid("must be a number, got " + quoted(text));
  if (!(value >= 0.0 && value < 1.0)) return invalid(quoted(text) + " is not in [0, 1)");
  return value;
}

Result<bool> parse_bool(std::string_view text) {
  if (text == "true" || text == "1") return true;
  if (text == "false" || text == "0") return false;
  return invalid("must be true or false, got " + quoted(text));
}

Result<net::Endpoint> parse_endpoint(std::string_view text) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos) return invalid(quoted(text) + " is not host:port");
  const std::string_view host = text.substr(0, colon);
  const std::string_view port_text = text.substr(colon + 1);
  if (host.empty()) return invalid(quoted(text) + " is not host:port (the host is empty)");
  if (!net::is_host(host)) {
    return invalid(quoted(text) + " is not host:port (host " + quoted(host) +
                   " is not an IPv4 address or host name)");
  }
  const auto port = parse_unsigned(port_text, std::numeric_limits<uint16_t>::max());
  if (!port.ok()) {
    if (port_text.empty() || port_text.find_first_not_of("0123456789") != std::string_view::npos) {
      return invalid(quoted(text) + " is not host:port (port " + quoted(port_text) +
                     " is not a number)");
    }
    return invalid("port " + std::string(port_text) + " in " + quoted(text) +
                   " is out of range 0..65535");
  }
  return net::Endpoint{std::string(host), static_cast<uint16_t>(*port)};
}

}  // namespace gradgate::config
