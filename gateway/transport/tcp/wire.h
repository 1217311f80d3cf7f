// The bytes of the TCP transport's wire protocol, with no I/O: the handshake both sides send when
// a connection opens, and the length prefix in front of every message.
//
// Handshake (17 bytes): magic "GGT1", protocol version (u8), job id (u64 LE), rank (u32 LE).
// Message: length (u32 LE: bit 31 the probe flag, bits 0..30 the length, 1..max_message_bytes)
// followed by that many bytes. A probe's bytes are read (the receiver measures the link with
// them) and dropped; they never reach the layer above.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "gradgate/kernels/status.h"

namespace gradgate::gateway::tcp {

inline constexpr uint8_t kProtocolVersion = 2;
/// The largest length the prefix can carry next to the probe flag.
inline constexpr uint32_t kMaxLength = (uint32_t{1} << 31) - 1;
inline constexpr std::size_t kHandshakeBytes = 17;
inline constexpr std::size_t kLengthPrefixBytes = 4;

using HandshakeBytes = std::array<std::byte, kHandshakeBytes>;
using LengthPrefix = std::array<std::byte, kLengthPrefixBytes>;

/// What one side of a connection says about itself.
struct Hello {
  uint64_t job_id = 0;
  uint32_t rank = 0;
  bool operator==(const Hello&) const = default;
};

HandshakeBytes encode_handshake(const Hello& hello);
/// kIncompatible when the magic or the protocol version is not ours.
Result<Hello> decode_handshake(std::span<const std::byte, kHandshakeBytes> bytes);

struct Length {
  uint32_t bytes = 0;
  bool probe = false;
};

/// `length` at most kMaxLength.
LengthPrefix encode_length(uint32_t length, bool probe = false);
/// kMalformedFrame when the length is 0 or above `max_message_bytes`.
Result<Length> decode_length(std::span<const std::byte, kLengthPrefixBytes> bytes,
                             uint64_t max_message_bytes);

}  // namespace gradgate::gateway::tcp
