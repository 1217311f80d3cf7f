// The Ethernet / IPv4 / UDP headers around the reliability layer's datagrams on a DPDK port,
// with no I/O and no DPDK types (so that the bytes can be tested on their own).
//
// A frame is: Ethernet II (14 bytes, EtherType 0x0800), IPv4 (20 bytes: no options, DF set,
// TTL 64, header checksum filled in), UDP (8 bytes, checksum 0: the reliable layer's datagrams
// carry their own CRC32C), then the datagram. Frames are never fragmented: the datagram size is
// bounded by the port's MTU (udp_payload_limit).
//
// Pure functions, thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "gradgate/base/status.h"

namespace gradgate::gateway::dpdk {

inline constexpr std::size_t kEthernetHeaderBytes = 14;
inline constexpr std::size_t kIpv4HeaderBytes = 20;
inline constexpr std::size_t kUdpHeaderBytes = 8;
inline constexpr std::size_t kFrameHeaderBytes =
    kEthernetHeaderBytes + kIpv4HeaderBytes + kUdpHeaderBytes;

struct MacAddress {
  std::array<uint8_t, 6> bytes{};
  bool operator==(const MacAddress&) const = default;
};
inline constexpr MacAddress kBroadcastMac{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};

/// An IPv4 address (host byte order) and UDP port.
struct UdpAddress {
  uint32_t ipv4 = 0;
  uint16_t port = 0;
  bool operator==(const UdpAddress&) const = default;
};

/// The largest datagram a frame can carry on a port with this MTU (IP packet bytes).
inline constexpr std::size_t udp_payload_limit(uint32_t mtu) {
  return mtu > kIpv4HeaderBytes + kUdpHeaderBytes ? mtu - kIpv4HeaderBytes - kUdpHeaderBytes : 0;
}

/// "10.0.0.1" -> the address; kInvalidArgument for anything but a dotted IPv4 literal.
Result<uint32_t> parse_ipv4(const std::string& text);

/// Writes the headers of a frame from `src` to `dst` carrying `payload_bytes` of datagram.
void write_frame_headers(std::span<std::byte, kFrameHeaderBytes> out, const MacAddress& src_mac,
                         const MacAddress& dst_mac, const UdpAddress& src, const UdpAddress& dst,
                         std::size_t payload_bytes);

struct ParsedFrame {
  MacAddress src_mac;
  UdpAddress src;
  UdpAddress dst;
  std::span<const std::byte> payload;  // inside the frame
};

/// The UDP datagram in `frame`; nothing for anything else (other EtherTypes or protocols, IPv4
/// options or fragments, a bad header checksum, lengths that do not fit the frame). Trailing
/// Ethernet padding is ignored.
std::optional<ParsedFrame> parse_frame(std::span<const std::byte> frame);

}  // namespace gradgate::gateway::dpdk
