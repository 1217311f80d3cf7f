#include "gateway/transport/reliable/packet.h"

#include <algorithm>
#include <string>

#include "gradgate/kernels/crc32c.h"
#include "gradgate/kernels/wire_io.h"

namespace gradgate::gateway::reliable {
namespace {

using kernels::wire::load;
using kernels::wire::store;

constexpr std::array<std::byte, 4> kMagic = {std::byte{'G'}, std::byte{'G'}, std::byte{'R'},
                                             std::byte{'1'}};

Status malformed(const std::string& what) {
  return Status(ErrorCode::kMalformedFrame, "reliable packet: " + what);
}

void store_common(PacketType type, const PacketHeader& header, std::byte* at) {
  std::copy(kMagic.begin(), kMagic.end(), at);
  at[4] = std::byte{kPacketVersion};
  at[5] = std::byte{static_cast<uint8_t>(type)};
  store<uint16_t>(at + 6, 0);
  store(at + 8, header.job_id);
  store(at + 16, header.sender_rank);
  store(at + 20, header.receiver_rank);
  store(at + 24, header.sender_epoch);
  store(at + 32, header.receiver_epoch);
}

PacketHeader load_common(const std::byte* at) {
  return {load<uint64_t>(at + 8), load<uint32_t>(at + 16), load<uint32_t>(at + 20),
          load<uint64_t>(at + 24), load<uint64_t>(at + 32)};
}

/// Writes the CRC of out[0, size - 4) into its last 4 bytes.
void seal(std::span<std::byte> datagram) {
  const std::size_t body = datagram.size() - kChecksumBytes;
  store(datagram.data() + body, kernels::crc32c(datagram.first(body)));
}

Status check_sacks(const AckFields& fields) {
  if (fields.sack_count > kMaxSackRanges) {
    return malformed(std::to_string(fields.sack_count) + " SACK ranges, at most " +
                     std::to_string(kMaxSackRanges));
  }
  uint64_t floor = fields.cumulative;
  for (const SackRange& range : fields.ranges()) {
    if (range.begin <= floor || range.end <= range.begin) {
      return malformed("SACK range [" + std::to_string(range.begin) + ", " +
                       std::to_string(range.end) + ") is empty, unordered or not above " +
                       std::to_string(floor));
    }
    floor = range.end;
  }
  return {};
}

/// The size the header of `type` gives the whole datagram, from bytes known to be there.
Result<std::size_t> declared_size(PacketType type, std::span<const std::byte> datagram) {
  const std::size_t header = type == PacketType::kData ? kDataHeaderBytes : kAckHeaderBytes;
  if (datagram.size() < header + kChecksumBytes) {
    return malformed("truncated: " + std::to_string(datagram.size()) + " bytes, a " +
                     (type == PacketType::kData ? "DATA" : "ACK") + " packet has at least " +
                     std::to_string(header + kChecksumBytes));
  }
  if (type == PacketType::kData) {
    return data_packet_bytes(load<uint32_t>(datagram.data() + 64));
  }
  const auto sack_count = load<uint32_t>(datagram.data() + 52);
  if (sack_count > kMaxSackRanges) {
    return malformed(std::to_string(sack_count) + " SACK ranges, at most " +
                     std::to_string(kMaxSackRanges));
  }
  return ack_packet_bytes(sack_count);
}

Result<PacketType> decode_type(std::span<const std::byte> datagram) {
  if (datagram.size() < kCommonHeaderBytes + kChecksumBytes) {
    return malformed("truncated: " + std::to_string(datagram.size()) + " bytes");
  }
  if (datagram.size() > kMaxDatagramBytes) {
    return malformed(std::to_string(datagram.size()) + " bytes, over the " +
                     std::to_string(kMaxDatagramBytes) + "-byte datagram limit");
  }
  if (!std::equal(kMagic.begin(), kMagic.end(), datagram.begin())) {
    return malformed("bad magic (not a gradgate reliable packet)");
  }
  const auto version = std::to_integer<uint8_t>(datagram[4]);
  if (version != kPacketVersion) {
    return malformed("version " + std::to_string(version) + ", expected " +
                     std::to_string(kPacketVersion));
  }
  const auto type = std::to_integer<uint8_t>(datagram[5]);
  if (type != static_cast<uint8_t>(PacketType::kData) &&
      type != static_cast<uint8_t>(PacketType::kAck)) {
    return malformed("unknown packet type " + std::to_string(type));
  }
  if (load<uint16_t>(datagram.data() + 6) != 0) return malformed("reserved bits set");
  return static_cast<PacketType>(type);
}

}  // namespace

Result<std::size_t> encode_data(const PacketHeader& header, const DataFields& fields,
                                std::span<const std::byte> payload, std::span<std::byte> out) {
  if (payload.empty() || payload.size() > kMaxPayloadBytes) {
    return Status(ErrorCode::kInvalidArgument,
                  "reliable packet: payload of " + std::to_string(payload.size()) +
                      " bytes, outside [1, " + std::to_string(kMaxPayloadBytes) + "]");
  }
  if (fields.fragment_index >= fields.fragment_count) {
    return Status(ErrorCode::kInvalidArgument, "reliable packet: fragment " +
                                                   std::to_string(fields.fragment_index) + " of " +
                                                   std::to_string(fields.fragment_count));
  }
  const std::size_t size = data_packet_bytes(payload.size());
  if (out.size() < size) {
    return Status(ErrorCode::kResourceExhausted, "reliable packet: DATA needs " +
                                                     std::to_string(size) + " bytes, buffer has " +
                                                     std::to_string(out.size()));
  }
  std::byte* at = out.data();
  store_common(PacketType::kData, header, at);
  store(at + 40, fields.sequence);
  store(at + 48, fields.message_id);
  store(at + 56, fields.fragment_index);
  store(at + 60, fields.fragment_count);
  store(at + 64, static_cast<uint32_t>(payload.size()));
  std::copy(payload.begin(), payload.end(), at + kDataHeaderBytes);
  seal(out.first(size));
  return size;
}

Result<std::size_t> encode_ack(const PacketHeader& header, const AckFields& fields,
                               std::span<std::byte> out) {
  if (Status sacks = check_sacks(fields); !sacks.ok()) {
    return Status(ErrorCode::kInvalidArgument, sacks.message());
  }
  const std::size_t size = ack_packet_bytes(fields.sack_count);
  if (out.size() < size) {
    return Status(ErrorCode::kResourceExhausted, "reliable packet: ACK needs " +
                                                     std::to_string(size) + " bytes, buffer has " +
                                                     std::to_string(out.size()));
  }
  std::byte* at = out.data();
  store_common(PacketType::kAck, header, at);
  store(at + 40, fields.cumulative);
  store(at + 48, fields.window);
  store(at + 52, fields.sack_count);
  for (uint32_t i = 0; i < fields.sack_count; ++i) {
    std::byte* range = at + kAckHeaderBytes + i * kSackRangeBytes;
    store(range, fields.sacks[i].begin);
    store(range + 8, fields.sacks[i].end);
  }
  seal(out.first(size));
  return size;
}

Result<PacketView> decode_packet(std::span<const std::byte> datagram) {
  Result<PacketType> type = decode_type(datagram);
  if (!type.ok()) return type.status();
  Result<std::size_t> size = declared_size(*type, datagram);
  if (!size.ok()) return size.status();
  if (*size != datagram.size()) {
    return malformed(std::to_string(datagram.size()) + " bytes, the header says " +
                     std::to_string(*size));
  }
  const std::size_t body = datagram.size() - kChecksumBytes;
  const auto expected_crc = load<uint32_t>(datagram.data() + body);
  if (kernels::crc32c(datagram.first(body)) != expected_crc) {
    return Status(ErrorCode::kChecksumMismatch, "reliable packet: CRC32C mismatch");
  }
  const std::byte* at = datagram.data();
  PacketView view;
  view.type = *type;
  view.header = load_common(at);
  if (view.header.sender_epoch == 0) return malformed("sender epoch 0");
  if (*type == PacketType::kData) {
    view.data = {load<uint64_t>(at + 40), load<uint64_t>(at + 48), load<uint32_t>(at + 56),
                 load<uint32_t>(at + 60)};
    view.payload = datagram.subspan(kDataHeaderBytes, body - kDataHeaderBytes);
    if (view.payload.empty()) return malformed("DATA packet with no payload");
    if (view.data.fragment_index >= view.data.fragment_count) {
      return malformed("fragment " + std::to_string(view.data.fragment_index) + " of " +
                       std::to_string(view.data.fragment_count));
    }
    return view;
  }
  view.ack.cumulative = load<uint64_t>(at + 40);
  view.ack.window = load<uint32_t>(at + 48);
  view.ack.sack_count = load<uint32_t>(at + 52);
  for (uint32_t i = 0; i < view.ack.sack_count; ++i) {
    const std::byte* range = at + kAckHeaderBytes + i * kSackRangeBytes;
    view.ack.sacks[i] = {load<uint64_t>(range), load<uint64_t>(range + 8)};
  }
  GRADGATE_RETURN_IF_ERROR(check_sacks(view.ack));
  return view;
}

}  // namespace gradgate::gateway::reliable
