#include "gradgate/kernels/frame.h"

#include <string>

#include "gradgate/base/check.h"
#include "gradgate/kernels/crc32c.h"
#include "gradgate/kernels/wire_io.h"

namespace gradgate::kernels {
namespace {

constexpr size_t kCrcOffset = 44;

uint32_t frame_crc(std::span<const std::byte> header, std::span<const std::byte> payload) {
  return crc32c_extend(crc32c(header.first(kCrcOffset)), payload);
}

}  // namespace

uint32_t write_frame_header(const FrameHeader& h, std::span<std::byte> frame) {
  GRADGATE_DCHECK(frame.size() >= kFrameHeaderBytes, "a frame header needs kFrameHeaderBytes");
  std::byte* p = frame.data();
  wire::store<uint32_t>(p + 0, kFrameMagic);
  wire::store<uint8_t>(p + 4, kFrameVersion);
  wire::store<uint8_t>(p + 5, static_cast<uint8_t>(h.codec));
  wire::store<uint8_t>(p + 6, h.round);
  wire::store<uint8_t>(p + 7, h.flags);
  wire::store<uint32_t>(p + 8, h.tensor_id);
  wire::store<uint32_t>(p + 12, h.job_id);
  wire::store<uint64_t>(p + 16, h.step);
  wire::store<uint64_t>(p + 24, h.element_count);
  wire::store<uint32_t>(p + 32, h.policy_version);
  wire::store<uint32_t>(p + 36, h.param);
  wire::store<uint32_t>(p + 40, h.payload_bytes);
  return crc32c(frame.first(kCrcOffset));
}

void store_frame_crc(uint32_t crc, std::span<std::byte> frame) {
  wire::store<uint32_t>(frame.data() + kCrcOffset, crc);
}

void seal_frame(const FrameHeader& h, std::span<std::byte> frame) {
  const uint32_t header_crc = write_frame_header(h, frame);
  store_frame_crc(crc32c_extend(header_crc, frame.subspan(kFrameHeaderBytes, h.payload_bytes)),
                  frame);
}

Result<FrameHeader> peek_frame_header(std::span<const std::byte> bytes) {
  if (bytes.size() < kFrameHeaderBytes) {
    return Status(ErrorCode::kMalformedFrame, "frame of " + std::to_string(bytes.size()) +
                                                  " bytes is shorter than its 48-byte header");
  }
  const std::byte* p = bytes.data();
  if (wire::load<uint32_t>(p) != kFrameMagic) {
    return Status(ErrorCode::kMalformedFrame, "frame does not start with the magic GGF1");
  }
  if (const auto version = wire::load<uint8_t>(p + 4); version != kFrameVersion) {
    return Status(ErrorCode::kMalformedFrame, "frame version " + std::to_string(version) +
                                                  " is not supported (expected " +
                                                  std::to_string(kFrameVersion) + ")");
  }
  FrameHeader h;
  const auto codec = wire::load<uint8_t>(p + 5);
  if (codec >= kCodecCount) {
    return Status(ErrorCode::kMalformedFrame,
                  "frame names unknown codec id " + std::to_string(codec));
  }
  h.codec = static_cast<CodecId>(codec);
  h.round = wire::load<uint8_t>(p + 6);
  h.flags = wire::load<uint8_t>(p + 7);
  h.tensor_id = wire::load<uint32_t>(p + 8);
  h.job_id = wire::load<uint32_t>(p + 12);
  h.step = wire::load<uint64_t>(p + 16);
  h.element_count = wire::load<uint64_t>(p + 24);
  h.policy_version = wire::load<uint32_t>(p + 32);
  h.param = wire::load<uint32_t>(p + 36);
  h.payload_bytes = wire::load<uint32_t>(p + 40);
  if (h.element_count == 0 || h.element_count > kMaxFrameElements) {
    return Status(
        ErrorCode::kMalformedFrame,
        "frame element count " + std::to_string(h.element_count) + " is out of range [1, 2^32)");
  }
  return h;
}

Result<FrameView> parse_frame(std::span<const std::byte> bytes) {
  auto header = peek_frame_header(bytes);
  if (!header.ok()) return header.status();
  const size_t expected = kFrameHeaderBytes + header->payload_bytes;
  if (bytes.size() != expected) {
    return Status(ErrorCode::kMalformedFrame, "frame is " + std::to_string(bytes.size()) +
                                                  " bytes but its header declares " +
                                                  std::to_string(expected));
  }
  const uint32_t stored = wire::load<uint32_t>(bytes.data() + kCrcOffset);
  const auto payload = bytes.subspan(kFrameHeaderBytes);
  if (frame_crc(bytes, payload) != stored) {
    return Status(ErrorCode::kChecksumMismatch, "frame CRC32C does not match its bytes");
  }
  return FrameView{*header, payload};
}

Status check_same_stream(const FrameHeader& a, const FrameHeader& b) {
  if (a.codec != b.codec || a.tensor_id != b.tensor_id || a.job_id != b.job_id ||
      a.step != b.step || a.round != b.round || a.element_count != b.element_count ||
      a.policy_version != b.policy_version) {
    return Status(ErrorCode::kIncompatible,
                  "frames differ in codec, job, tensor, step, round, size or policy version");
  }
  return {};
}

}  // namespace gradgate::kernels
