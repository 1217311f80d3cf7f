// The wire frame: the unit every gateway sends, sums and decodes.
//
// Layout (little-endian, 48-byte header followed by `payload_bytes` of codec payload):
//
//   offset size field
//   0      4    magic "GGF1" (0x31464747)
//   4      1    version (kFrameVersion)
//   5      1    codec id (CodecId)
//   6      1    round (multi-round codecs: 0..rounds-1; else 0)
//   7      1    flags (codec-specific; unknown bits must be zero)
//   8      4    tensor id
//   12     4    job id
//   16     8    step
//   24     8    element count of the dense tensor
//   32     4    policy version the sender encoded under
//   36     4    param (codec-specific, e.g. qsgd bit widths, powersgd rank)
//   40     4    payload length in bytes
//   44     4    CRC32C of bytes [0, 44) and of the payload
//
// parse_frame() checks everything that the header alone can tell; each codec's decoder checks its
// payload (counts, indices, values) against the header before it touches the output buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "gradgate/base/codec_table.h"
#include "gradgate/base/status.h"

namespace gradgate::kernels {

inline constexpr uint32_t kFrameMagic = 0x31464747;  // "GGF1" read as a little-endian u32
inline constexpr uint8_t kFrameVersion = 1;
inline constexpr size_t kFrameHeaderBytes = 48;
/// Largest dense tensor a frame may describe (2^32 - 1 elements keeps every index in a u32).
inline constexpr uint64_t kMaxFrameElements = 0xFFFFFFFFull;

struct FrameHeader {
  CodecId codec = CodecId::kNone;
  uint8_t round = 0;
  uint8_t flags = 0;
  uint32_t tensor_id = 0;
  uint32_t job_id = 0;
  uint64_t step = 0;
  uint64_t element_count = 0;
  uint32_t policy_version = 0;
  uint32_t param = 0;
  uint32_t payload_bytes = 0;
};

/// A parsed frame: its header and a view of its payload (borrowed from the parsed bytes).
struct FrameView {
  FrameHeader header;
  std::span<const std::byte> payload;
};

/// Writes `header` into frame[0, 48) and the CRC32C over the header and frame[48, 48 +
/// header.payload_bytes). The payload must already be in place. `frame` must be large enough.
void seal_frame(const FrameHeader& header, std::span<std::byte> frame);

/// seal_frame in two parts, for codecs that checksum their payload block by block while they
/// write it (one pass over memory instead of two): write_frame_header writes `header` into
/// frame[0, 48) and returns the CRC32C of the bytes it covers; extend it over the payload, in
/// order, with crc32c_extend, and store the result with store_frame_crc.
uint32_t write_frame_header(const FrameHeader& header, std::span<std::byte> frame);
void store_frame_crc(uint32_t crc, std::span<std::byte> frame);

/// Parses and verifies a whole frame: `bytes` must be exactly one frame. Checks magic, version,
/// codec id, element count bound, payload length against the buffer, and the CRC32C.
Result<FrameView> parse_frame(std::span<const std::byte> bytes);

/// Reads only the header fields (no CRC check): for transports that need the payload length to
/// know how many bytes to read. `bytes` must hold at least kFrameHeaderBytes.
Result<FrameHeader> peek_frame_header(std::span<const std::byte> bytes);

/// kIncompatible unless a and b describe the same tensor, step, round, policy and codec.
Status check_same_stream(const FrameHeader& a, const FrameHeader& b);

}  // namespace gradgate::kernels
