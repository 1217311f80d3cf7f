#include "gateway/transport/dpdk/udp_frame.h"

#include <arpa/inet.h>

#include <cstring>

namespace gradgate::gateway::dpdk {
namespace {

constexpr uint16_t kEtherTypeIpv4 = 0x0800;
constexpr uint8_t kProtocolUdp = 17;
constexpr uint8_t kTtl = 64;
constexpr uint16_t kDontFragment = 0x4000;
constexpr uint16_t kFragmentMask = 0x3fff;  // the MF flag and the offset

void put16(std::byte* at, uint16_t value) {
  at[0] = std::byte(value >> 8);
  at[1] = std::byte(value & 0xff);
}
void put32(std::byte* at, uint32_t value) {
  put16(at, static_cast<uint16_t>(value >> 16));
  put16(at + 2, static_cast<uint16_t>(value & 0xffff));
}
uint16_t get16(const std::byte* at) {
  return static_cast<uint16_t>((std::to_integer<unsigned>(at[0]) << 8) |
                               std::to_integer<unsigned>(at[1]));
}
uint32_t get32(const std::byte* at) {
  return (static_cast<uint32_t>(get16(at)) << 16) | get16(at + 2);
}

/// The ones' complement sum of the IPv4 header: 0 once the checksum field is right.
uint16_t header_checksum(const std::byte* header) {
  uint32_t sum = 0;
  for (std::size_t i = 0; i < kIpv4HeaderBytes; i += 2) sum += get16(header + i);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum & 0xffff);
}

}  // namespace

Result<uint32_t> parse_ipv4(const std::string& text) {
  in_addr address{};
  if (::inet_pton(AF_INET, text.c_str(), &address) != 1) {
    return Status(ErrorCode::kInvalidArgument, "'" + text + "' is not an IPv4 address");
  }
  return ntohl(address.s_addr);
}

void write_frame_headers(std::span<std::byte, kFrameHeaderBytes> out, const MacAddress& src_mac,
                         const MacAddress& dst_mac, const UdpAddress& src, const UdpAddress& dst,
                         std::size_t payload_bytes) {
  std::byte* ethernet = out.data();
  std::memcpy(ethernet, dst_mac.bytes.data(), 6);
  std::memcpy(ethernet + 6, src_mac.bytes.data(), 6);
  put16(ethernet + 12, kEtherTypeIpv4);

  std::byte* ip = ethernet + kEthernetHeaderBytes;
  const auto udp_length = static_cast<uint16_t>(kUdpHeaderBytes + payload_bytes);
  ip[0] = std::byte{0x45};  // version 4, 5 words
  ip[1] = std::byte{0};
  put16(ip + 2, static_cast<uint16_t>(kIpv4HeaderBytes + udp_length));
  put16(ip + 4, 0);  // identification: unused without fragments
  put16(ip + 6, kDontFragment);
  ip[8] = std::byte{kTtl};
  ip[9] = std::byte{kProtocolUdp};
  put16(ip + 10, 0);
  put32(ip + 12, src.ipv4);
  put32(ip + 16, dst.ipv4);
  put16(ip + 10, header_checksum(ip));

  std::byte* udp = ip + kIpv4HeaderBytes;
  put16(udp, src.port);
  put16(udp + 2, dst.port);
  put16(udp + 4, udp_length);
  put16(udp + 6, 0);
}

std::optional<ParsedFrame> parse_frame(std::span<const std::byte> frame) {
  if (frame.size() < kFrameHeaderBytes) return std::nullopt;
  const std::byte* ethernet = frame.data();
  if (get16(ethernet + 12) != kEtherTypeIpv4) return std::nullopt;
  const std::byte* ip = ethernet + kEthernetHeaderBytes;
  if (ip[0] != std::byte{0x45} || ip[9] != std::byte{kProtocolUdp}) return std::nullopt;
  if ((get16(ip + 6) & kFragmentMask) != 0 || header_checksum(ip) != 0) return std::nullopt;
  const std::size_t ip_length = get16(ip + 2);
  const std::byte* udp = ip + kIpv4HeaderBytes;
  const std::size_t udp_length = get16(udp + 4);
  if (ip_length > frame.size() - kEthernetHeaderBytes ||
      udp_length != ip_length - kIpv4HeaderBytes || udp_length < kUdpHeaderBytes) {
    return std::nullopt;
  }
  ParsedFrame parsed;
  std::memcpy(parsed.src_mac.bytes.data(), ethernet + 6, 6);
  parsed.src = {get32(ip + 12), get16(udp)};
  parsed.dst = {get32(ip + 16), get16(udp + 2)};
  parsed.payload = frame.subspan(kFrameHeaderBytes, udp_length - kUdpHeaderBytes);
  return parsed;
}

}  // namespace gradgate::gateway::dpdk
