// The bytes of the TCP transport's wire protocol, with no I/O: the handshake both sides send when
// a connection opens, and the length prefix in front of every frame.
//
// Handshake (52 bytes): magic "GGT1", protocol version (u8), job id (u64 LE), rank (u32 LE), the
// port the sender listens on (u16 LE), and the session the connection is to carry on
// (docs/transport.md#sessions): the sender's incarnation (u64, random per transport start), the
// incarnation of the peer whose messages it holds (u64, 0: none), how many of that peer's
// messages it has delivered (u64), the session's id (u64, drawn by the accepting side for every
// fresh session; 0: none), and flags (u8; bit 0, in the accepting side's answer only: the
// session resumes).
// Frame: length (u32 LE: bit 31 the control flag, bits 0..30 the length, 1..max_message_bytes)
// followed by that many bytes. A message frame carries one message for the layer above. A control
// frame's first byte says what it is: a probe (the receiver measures the link with its bytes and
// drops them), an acknowledgement (u64 LE: messages delivered so far; sent after deliveries and,
// when nothing else is written, as the heartbeat), or a goodbye (the sender is stopping).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "gradgate/base/job_limits.h"
#include "gradgate/base/status.h"

namespace gradgate::gateway::tcp {

inline constexpr uint8_t kProtocolVersion = 3;
/// The largest length the prefix can carry next to the control flag.
inline constexpr uint32_t kMaxLength = kMaxPeerMessageBytes;
inline constexpr std::size_t kHandshakeBytes = 52;
inline constexpr std::size_t kLengthPrefixBytes = 4;

using HandshakeBytes = std::array<std::byte, kHandshakeBytes>;
using LengthPrefix = std::array<std::byte, kLengthPrefixBytes>;

/// What one side of a connection says about itself and the session it holds with the other.
struct Hello {
  uint64_t job_id = 0;
  uint32_t rank = 0;
  uint16_t listen_port = 0;       // where the sender accepts connections
  uint64_t incarnation = 0;       // the sender's, never 0
  uint64_t peer_incarnation = 0;  // the peer's whose messages the sender counted; 0: none
  uint64_t received = 0;          // messages of that peer delivered by the sender
  uint64_t session_id = 0;        // the session the sender holds with the peer; 0: none
  bool resumed = false;           // the answer only: the session goes on from `received`
  bool operator==(const Hello&) const = default;
};

HandshakeBytes encode_handshake(const Hello& hello);
/// kIncompatible when the magic or the protocol version is not ours, or the incarnation is 0.
Result<Hello> decode_handshake(std::span<const std::byte, kHandshakeBytes> bytes);

struct Length {
  uint32_t bytes = 0;
  bool control = false;
};

/// `length` at most kMaxLength.
LengthPrefix encode_length(uint32_t length, bool control = false);
/// kMalformedFrame when the length is 0 or above `max_message_bytes`.
Result<Length> decode_length(std::span<const std::byte, kLengthPrefixBytes> bytes,
                             uint64_t max_message_bytes);

/// The first byte of a control frame.
enum class ControlKind : uint8_t { kProbe = 0, kAck = 1, kGoodbye = 2 };

inline constexpr std::size_t kAckBytes = 9;  // kind + u64
inline constexpr std::size_t kGoodbyeBytes = 1;
using AckBytes = std::array<std::byte, kAckBytes>;

AckBytes encode_ack(uint64_t delivered);

/// A control frame's body, parsed: probes keep only their size.
struct Control {
  ControlKind kind = ControlKind::kProbe;
  uint64_t delivered = 0;  // kAck
};
/// kMalformedFrame for an unknown kind or a body of the wrong size.
Result<Control> decode_control(std::span<const std::byte> body);

}  // namespace gradgate::gateway::tcp
