#include "gateway/transport/tcp/wire.h"

#include <algorithm>
#include <string>

#include "gradgate/kernels/wire_io.h"

namespace gradgate::gateway::tcp {
namespace {

constexpr std::array<std::byte, 4> kMagic = {std::byte{'G'}, std::byte{'G'}, std::byte{'T'},
                                             std::byte{'1'}};

}  // namespace

HandshakeBytes encode_handshake(const Hello& hello) {
  HandshakeBytes bytes{};
  std::copy(kMagic.begin(), kMagic.end(), bytes.begin());
  bytes[4] = std::byte{kProtocolVersion};
  kernels::wire::store(&bytes[5], hello.job_id);
  kernels::wire::store(&bytes[13], hello.rank);
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
  return Hello{kernels::wire::load<uint64_t>(&bytes[5]), kernels::wire::load<uint32_t>(&bytes[13])};
}

namespace {
constexpr uint32_t kProbeFlag = uint32_t{1} << 31;
}  // namespace

LengthPrefix encode_length(uint32_t length, bool probe) {
  LengthPrefix bytes{};
  kernels::wire::store(bytes.data(), length | (probe ? kProbeFlag : 0));
  return bytes;
}

Result<Length> decode_length(std::span<const std::byte, kLengthPrefixBytes> bytes,
                             uint64_t max_message_bytes) {
  const auto word = kernels::wire::load<uint32_t>(bytes.data());
  const uint32_t length = word & ~kProbeFlag;
  if (length == 0 || length > max_message_bytes) {
    return Status(ErrorCode::kMalformedFrame, "message length " + std::to_string(length) +
                                                  " is outside [1, " +
                                                  std::to_string(max_message_bytes) + "]");
  }
  return Length{length, (word & kProbeFlag) != 0};
}

}  // namespace gradgate::gateway::tcp
