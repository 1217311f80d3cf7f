// What a configured host may be: a dotted-quad IPv4 address, or a host name made of letters,
// digits, '.', '-' and '_' (Kubernetes' node and pod names among them). Kept apart from the
// resolver so that configuration checks use it without a network library.
#pragma once

#include <arpa/inet.h>

#include <algorithm>
#include <string>
#include <string_view>

namespace gradgate::net {

/// Whether `host` may name a host. Text of digits and dots alone reads as an address and must be
/// a dotted quad: a resolver would take shorthand forms ("0" for every interface, "127.1").
inline bool is_host(std::string_view host) {
  const auto in = [&host](auto allowed) { return std::all_of(host.begin(), host.end(), allowed); };
  const auto digit_or_dot = [](char c) { return c == '.' || (c >= '0' && c <= '9'); };
  const auto host_char = [&digit_or_dot](char c) {
    return digit_or_dot(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' ||
           c == '_';
  };
  if (host.empty() || !in(host_char)) return false;
  in_addr address{};
  return !in(digit_or_dot) || inet_pton(AF_INET, std::string(host).c_str(), &address) == 1;
}

}  // namespace gradgate::net
