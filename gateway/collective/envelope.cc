#include "gateway/collective/envelope.h"

#include <bit>
#include <cstring>
#include <string>

namespace gradgate::gateway {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the envelope is little-endian and so is the host");

template <typename T>
void put(std::byte* out, size_t offset, T value) {
  std::memcpy(out + offset, &value, sizeof(T));
}

template <typename T>
T get(std::span<const std::byte> in, size_t offset) {
  T value;
  std::memcpy(&value, in.data() + offset, sizeof(T));
  return value;
}

}  // namespace

std::string_view message_kind_name(MessageKind kind) {
  switch (kind) {
    case MessageKind::kScale:
      return "scale";
    case MessageKind::kRingReduce:
      return "ring_reduce";
    case MessageKind::kRingGather:
      return "ring_gather";
    case MessageKind::kGather:
      return "gather";
    case MessageKind::kAggregateIn:
      return "aggregate_in";
    case MessageKind::kAggregateOut:
      return "aggregate_out";
    case MessageKind::kAbort:
      return "abort";
  }
  return "unknown";
}

void write_envelope(const Envelope& envelope, std::span<std::byte> message) {
  std::byte* out = message.data();
  put<uint32_t>(out, 0, kEnvelopeMagic);
  put<uint8_t>(out, 4, kEnvelopeVersion);
  put<uint8_t>(out, 5, static_cast<uint8_t>(envelope.kind));
  put<uint16_t>(out, 6, envelope.chunk);
  put<uint32_t>(out, 8, envelope.tensor_id);
  put<uint32_t>(out, 12, envelope.phase);
  put<uint64_t>(out, 16, envelope.seq);
}

std::vector<std::byte> make_message(const Envelope& envelope, std::span<const std::byte> payload) {
  std::vector<std::byte> message(kEnvelopeBytes + payload.size());
  write_envelope(envelope, message);
  if (!payload.empty())
    std::memcpy(message.data() + kEnvelopeBytes, payload.data(), payload.size());
  return message;
}

Result<Envelope> parse_envelope(std::span<const std::byte> message) {
  if (message.size() < kEnvelopeBytes) {
    return Status(ErrorCode::kMalformedFrame,
                  "message of " + std::to_string(message.size()) + " bytes is shorter than the " +
                      std::to_string(kEnvelopeBytes) + "-byte envelope");
  }
  if (get<uint32_t>(message, 0) != kEnvelopeMagic) {
    return Status(ErrorCode::kMalformedFrame, "envelope magic is not GGE1");
  }
  const auto version = get<uint8_t>(message, 4);
  if (version != kEnvelopeVersion) {
    return Status(ErrorCode::kMalformedFrame,
                  "envelope version " + std::to_string(version) + " is not supported");
  }
  const auto kind = get<uint8_t>(message, 5);
  if (kind == 0 || kind > kMaxMessageKind) {
    return Status(ErrorCode::kMalformedFrame, "unknown message kind " + std::to_string(kind));
  }
  Envelope envelope;
  envelope.kind = static_cast<MessageKind>(kind);
  envelope.chunk = get<uint16_t>(message, 6);
  envelope.tensor_id = get<uint32_t>(message, 8);
  envelope.phase = get<uint32_t>(message, 12);
  envelope.seq = get<uint64_t>(message, 16);
  return envelope;
}

}  // namespace gradgate::gateway
