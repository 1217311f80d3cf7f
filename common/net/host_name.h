// What a configured host may be: a dotted-quad IPv4 address, or a host name (RFC 1123 labels of
// letters, digits and '-', and '_' as Kubernetes' names may have; no trailing dot, which
// /etc/hosts would not match). Kept
// apart from the resolver so that configuration checks use it without a network library.
#pragma once

#include <arpa/inet.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

namespace gradgate::net {

/// Whether `host` may name a host. Text the resolver would read as an IPv4 address in any of its
/// shorthand forms ("0" for every interface, "127.1", "0x7f.1") must be a dotted quad; a name's
/// last label is not all digits ("127.0.0.256" is a bad address, not a name to look up).
inline bool is_host(std::string_view host) {
  if (host.find('\0') != std::string_view::npos) return false;  // C functions would stop there
  const std::string text(host);
  in_addr address{};
  if (inet_aton(text.c_str(), &address) != 0) {
    return inet_pton(AF_INET, text.c_str(), &address) == 1;
  }
  if (host.empty() || host.size() > 253) return false;
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  const std::string_view last = host.substr(host.rfind('.') + 1);
  if (std::all_of(last.begin(), last.end(), digit)) return false;
  for (std::size_t start = 0; start <= host.size();) {
    const std::size_t end = std::min(host.find('.', start), host.size());
    const std::string_view label = host.substr(start, end - start);
    const bool valid = !label.empty() && label.size() <= 63 && label.front() != '-' &&
                       label.back() != '-' &&
                       std::all_of(label.begin(), label.end(), [&digit](char c) {
                         return digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                                c == '-' || c == '_';
                       });
    if (!valid) return false;
    start = end + 1;
  }
  return true;
}

}  // namespace gradgate::net
