#include "gateway/collective/envelope.h"

#include <cstring>
#include <string>

#include "gradgate/base/check.h"
#include "gradgate/kernels/wire_io.h"

namespace gradgate::gateway {

using kernels::wire::load;
using kernels::wire::store;

namespace {
constexpr uint32_t kFlagDecodesOnGpu = 1;
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
  GRADGATE_DCHECK(message.size() >= kEnvelopeBytes, "an envelope needs kEnvelopeBytes");
  std::byte* out = message.data();
  store<uint32_t>(out, kEnvelopeMagic);
  store<uint8_t>(out + 4, kEnvelopeVersion);
  store<uint8_t>(out + 5, static_cast<uint8_t>(envelope.kind));
  store<uint16_t>(out + 6, envelope.chunk);
  store<uint32_t>(out + 8, envelope.tensor_id);
  store<uint32_t>(out + 12, envelope.phase);
  store<uint64_t>(out + 16, envelope.seq);
  store<uint32_t>(out + 24, envelope.sender_decodes_on_gpu ? kFlagDecodesOnGpu : 0u);
  envelope.stamp.write(message.subspan(28).first<SwitchStamp::kBytes>());
}

MessageBytes make_message(const Envelope& envelope, std::span<const std::byte> payload) {
  MessageBytes message(kEnvelopeBytes + payload.size());
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
  if (load<uint32_t>(message.data()) != kEnvelopeMagic) {
    return Status(ErrorCode::kMalformedFrame, "envelope magic is not GGE1");
  }
  const auto version = load<uint8_t>(message.data() + 4);
  if (version != kEnvelopeVersion) {
    return Status(ErrorCode::kMalformedFrame,
                  "envelope version " + std::to_string(version) + " is not supported");
  }
  const auto kind = load<uint8_t>(message.data() + 5);
  if (kind == 0 || kind > kMaxMessageKind) {
    return Status(ErrorCode::kMalformedFrame, "unknown message kind " + std::to_string(kind));
  }
  Envelope envelope;
  envelope.kind = static_cast<MessageKind>(kind);
  envelope.chunk = load<uint16_t>(message.data() + 6);
  envelope.tensor_id = load<uint32_t>(message.data() + 8);
  envelope.phase = load<uint32_t>(message.data() + 12);
  envelope.seq = load<uint64_t>(message.data() + 16);
  envelope.stamp = SwitchStamp::read(message.subspan(28).first<SwitchStamp::kBytes>());
  envelope.sender_decodes_on_gpu = (load<uint32_t>(message.data() + 24) & kFlagDecodesOnGpu) != 0;
  return envelope;
}

}  // namespace gradgate::gateway
