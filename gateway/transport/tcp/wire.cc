#include "gateway/transport/tcp/wire.h"

#include <algorithm>
#include <string>

#include "gradgate/kernels/wire_io.h"

namespace gradgate::gateway::tcp {
namespace {

constexpr std::array<std::byte, 4> kMagic = {std::byte{'G'}, std::byte{'G'}, std::byte{'T'},
                                             std::byte{'1'}};
constexpr uint32_t kControlFlag = uint32_t{1} << 31;
constexpr uint8_t kResumedFlag = 1;

}  // namespace

HandshakeBytes encode_handshake(const Hello& hello) {
  HandshakeBytes bytes{};
  std::copy(kMagic.begin(), kMagic.end(), bytes.begin());
  bytes[4] = std::byte{kProtocolVersion};
  kernels::wire::store(&bytes[5], hello.job_id);
  kernels::wire::store(&bytes[13], hello.rank);
  kernels::wire::store(&bytes[17], hello.listen_port);
  kernels::wire::store(&bytes[19], hello.incarnation);
  kernels::wire::store(&bytes[27], hello.peer_incarnation);
  kernels::wire::store(&bytes[35], hello.received);
  kernels::wire::store(&bytes[43], hello.session_id);
  bytes[51] = std::byte{hello.resumed ? kResumedFlag : uint8_t{0}};
  return bytes;
}

Result<Hello> decode_handshake(std::span<const std::byte, kHandshakeBytes> bytes) {
  if (!std::equal(kMagic.begin(), kMagic.end(), bytes.begin())) {
    return Status(ErrorCode::kIncompatible, "handshake: bad magic (not a gradgate transport)");
  }
  const auto version = std::to_integer<uint8_t>(bytes[4]);
  if (version != kProtocolVersion) {
    return Status(ErrorCode::kIncompatible, "handshake: protocol version " +
                                                std::to_string(version) + ", expected " +
                                                std::to_string(kProtocolVersion));
  }
  const auto flags = std::to_integer<uint8_t>(bytes[51]);
  Hello hello;
  hello.job_id = kernels::wire::load<uint64_t>(&bytes[5]);
  hello.rank = kernels::wire::load<uint32_t>(&bytes[13]);
  hello.listen_port = kernels::wire::load<uint16_t>(&bytes[17]);
  hello.incarnation = kernels::wire::load<uint64_t>(&bytes[19]);
  hello.peer_incarnation = kernels::wire::load<uint64_t>(&bytes[27]);
  hello.received = kernels::wire::load<uint64_t>(&bytes[35]);
  hello.session_id = kernels::wire::load<uint64_t>(&bytes[43]);
  hello.resumed = (flags & kResumedFlag) != 0;
  if (hello.incarnation == 0 || (flags & ~kResumedFlag) != 0) {
    return Status(ErrorCode::kIncompatible, "handshake: incarnation 0 or unknown flags");
  }
  return hello;
}

LengthPrefix encode_length(uint32_t length, bool control) {
  LengthPrefix bytes{};
  kernels::wire::store(bytes.data(), length | (control ? kControlFlag : 0));
  return bytes;
}

Result<Length> decode_length(std::span<const std::byte, kLengthPrefixBytes> bytes,
                             uint64_t max_message_bytes) {
  const auto word = kernels::wire::load<uint32_t>(bytes.data());
  const uint32_t length = word & ~kControlFlag;
  if (length == 0 || length > max_message_bytes) {
    return Status(ErrorCode::kMalformedFrame, "message length " + std::to_string(length) +
                                                  " is outside [1, " +
                                                  std::to_string(max_message_bytes) + "]");
  }
  return Length{length, (word & kControlFlag) != 0};
}

AckBytes encode_ack(uint64_t delivered) {
  AckBytes bytes{};
  bytes[0] = std::byte{static_cast<uint8_t>(ControlKind::kAck)};
  kernels::wire::store(&bytes[1], delivered);
  return bytes;
}

Result<Control> decode_control(std::span<const std::byte> body) {
  if (body.empty()) return Status(ErrorCode::kMalformedFrame, "an empty control frame");
  const auto kind = std::to_integer<uint8_t>(body[0]);
  switch (static_cast<ControlKind>(kind)) {
    case ControlKind::kProbe:
      return Control{ControlKind::kProbe, 0};
    case ControlKind::kAck:
      if (body.size() != kAckBytes) break;
      return Control{ControlKind::kAck, kernels::wire::load<uint64_t>(&body[1])};
    case ControlKind::kGoodbye:
      if (body.size() != kGoodbyeBytes) break;
      return Control{ControlKind::kGoodbye, 0};
  }
  return Status(ErrorCode::kMalformedFrame, "a control frame of kind " + std::to_string(kind) +
                                                " and " + std::to_string(body.size()) + " bytes");
}

}  // namespace gradgate::gateway::tcp
