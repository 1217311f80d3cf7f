// The datagrams of the reliability layer, with no I/O: DATA carries one fragment of a message,
// ACK says what the receiver holds. All fields are little-endian; every datagram ends with a
// CRC32C of all the bytes before it.
//
// Common header (40 bytes):
//   0 magic "GGR1" (4)   4 version (u8)   5 type (u8: 1 DATA, 2 ACK)   6 reserved, zero (u16)
//   8 job id (u64)   16 sender rank (u32)   20 receiver rank (u32)
//   24 sender epoch (u64, not 0): random per session start, so a restarted peer is recognised
//   32 receiver epoch (u64): the receiver's epoch as the sender knows it, 0 before it knows
// DATA (68-byte header, then the payload, then the CRC: 72 bytes of overhead):
//   40 sequence (u64)   48 message id (u64)   56 fragment index (u32)   60 fragment count (u32)
//   64 payload length (u32, at least 1)
// ACK (56 + 16 per range + 4 bytes):
//   40 cumulative ack (u64: every sequence below it received)   48 window (u32, packets)
//   52 SACK range count (u32, at most kMaxSackRanges)
//   56 ranges: [begin, end) as two u64, ascending, disjoint, above the cumulative ack
//
// encode_* write into a caller's buffer and return the datagram's size; decode_packet returns a
// view whose payload points into the datagram (valid while it is). Pure functions, thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "gradgate/base/status.h"

namespace gradgate::gateway::reliable {

inline constexpr uint8_t kPacketVersion = 1;
inline constexpr std::size_t kCommonHeaderBytes = 40;
inline constexpr std::size_t kDataHeaderBytes = 68;
inline constexpr std::size_t kAckHeaderBytes = 56;
inline constexpr std::size_t kSackRangeBytes = 16;
inline constexpr std::size_t kChecksumBytes = 4;
inline constexpr std::size_t kMaxSackRanges = 16;
/// The largest UDP payload over IPv4.
inline constexpr std::size_t kMaxDatagramBytes = 65507;
inline constexpr std::size_t kDataOverheadBytes = kDataHeaderBytes + kChecksumBytes;
inline constexpr std::size_t kMaxPayloadBytes = kMaxDatagramBytes - kDataOverheadBytes;
inline constexpr std::size_t kMaxAckBytes =
    kAckHeaderBytes + kMaxSackRanges * kSackRangeBytes + kChecksumBytes;

enum class PacketType : uint8_t { kData = 1, kAck = 2 };

/// Who a datagram is from and for.
struct PacketHeader {
  uint64_t job_id = 0;
  uint32_t sender_rank = 0;
  uint32_t receiver_rank = 0;
  uint64_t sender_epoch = 0;
  uint64_t receiver_epoch = 0;
  bool operator==(const PacketHeader&) const = default;
};

/// Where a DATA packet's payload belongs.
struct DataFields {
  uint64_t sequence = 0;
  uint64_t message_id = 0;
  uint32_t fragment_index = 0;
  uint32_t fragment_count = 0;
  bool operator==(const DataFields&) const = default;
};

/// Sequence numbers [begin, end) the receiver holds above its cumulative ack.
struct SackRange {
  uint64_t begin = 0;
  uint64_t end = 0;
  bool operator==(const SackRange&) const = default;
};

struct AckFields {
  uint64_t cumulative = 0;
  uint32_t window = 0;
  uint32_t sack_count = 0;
  std::array<SackRange, kMaxSackRanges> sacks{};

  std::span<const SackRange> ranges() const { return {sacks.data(), sack_count}; }
};

struct PacketView {
  PacketType type = PacketType::kData;
  PacketHeader header;
  DataFields data;                     // DATA only
  std::span<const std::byte> payload;  // DATA only: inside the decoded datagram
  AckFields ack;                       // ACK only
};

inline constexpr std::size_t data_packet_bytes(std::size_t payload_bytes) {
  return kDataOverheadBytes + payload_bytes;
}
inline constexpr std::size_t ack_packet_bytes(uint32_t sack_count) {
  return kAckHeaderBytes + sack_count * kSackRangeBytes + kChecksumBytes;
}

/// kInvalidArgument for an empty or oversized payload or a fragment index outside the count,
/// kResourceExhausted when `out` is too small.
Result<std::size_t> encode_data(const PacketHeader& header, const DataFields& fields,
                                std::span<const std::byte> payload, std::span<std::byte> out);
/// kInvalidArgument for SACK ranges that decode_packet would refuse, kResourceExhausted when
/// `out` is too small.
Result<std::size_t> encode_ack(const PacketHeader& header, const AckFields& fields,
                               std::span<std::byte> out);

/// kMalformedFrame for a datagram that breaks the format (its size, magic, version, type,
/// lengths, sender epoch, fragment index or SACK ranges), kChecksumMismatch when the CRC does
/// not match. Never reads outside `datagram`.
Result<PacketView> decode_packet(std::span<const std::byte> datagram);

}  // namespace gradgate::gateway::reliable
