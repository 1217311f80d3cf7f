// The collective layer's envelope: what every message between gateways starts with, ahead of its
// payload (a wire frame, a list of scales, or an abort reason). It names the collective operation
// (tensor, sequence number) and the message's place in it (kind, phase, chunk), so that a receiver
// can file a message that arrives before its own side of the operation has started.
//
// Layout (little-endian, 40 bytes):
//   0  u32 magic "GGE1"   4 u8 version   5 u8 kind   6 u16 chunk
//   8  u32 tensor id      12 u32 phase (an abort: the sender's ErrorCode)   16 u64 sequence number
//   24 u32 flags: bit 0 the sender decodes on the GPU; the other bits 0
//   28 12 bytes: the codec-switch agreement's stamp, written and read as one block
//      (agreement/switch_stamp.h)
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "gateway/agreement/switch_stamp.h"
#include "gateway/transport/transport.h"
#include "gradgate/base/status.h"

namespace gradgate::gateway {

enum class MessageKind : uint8_t {
  kScale = 1,         // payload: one f32 per chunk, the sender's candidate agreed scales
  kRingReduce = 2,    // payload: a frame; phase = reduce-scatter hop
  kRingGather = 3,    // payload: a frame; phase = all-gather hop
  kGather = 4,        // payload: a frame; phase = codec round
  kAggregateIn = 5,   // payload: a frame of one chunk, to the chunk's owner
  kAggregateOut = 6,  // payload: the owner's re-compressed sum of its chunk, to everyone
  kAbort = 7,         // payload: UTF-8 reason; phase = its ErrorCode; the sender gave up
};
inline constexpr uint8_t kMaxMessageKind = 7;

std::string_view message_kind_name(MessageKind kind);

inline constexpr uint32_t kEnvelopeMagic = 0x31454747;  // "GGE1" read as a little-endian u32
inline constexpr uint8_t kEnvelopeVersion = 4;
inline constexpr size_t kEnvelopeBytes = 40;

struct Envelope {
  MessageKind kind = MessageKind::kGather;
  uint16_t chunk = 0;
  uint32_t tensor_id = 0;
  uint32_t phase = 0;
  uint64_t seq = 0;
  /// The codec-switch agreement's stamp of the sender.
  SwitchStamp stamp{};
  /// The sender decodes this operation's frames on the GPU (for codecs whose GPU decoding is not
  /// the CPU's bits: every gateway of the job must decode alike).
  bool sender_decodes_on_gpu = false;
};

/// Writes `envelope` into message[0, kEnvelopeBytes) (the message must be at least that long).
void write_envelope(const Envelope& envelope, std::span<std::byte> message);

/// The envelope followed by `payload`, as one message.
MessageBytes make_message(const Envelope& envelope, std::span<const std::byte> payload);

/// Checks magic, version and kind; kMalformedFrame says which one is wrong.
Result<Envelope> parse_envelope(std::span<const std::byte> message);

}  // namespace gradgate::gateway
