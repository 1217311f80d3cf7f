// The payload layouts of the element-wise codecs (none, fp16, bf16, qsgd, sign) and the checks a
// decoder makes on them, shared by the CPU and CUDA codecs so that both accept the same frames and
// report the same errors. Checks that depend on the payload's values take the few facts they need
// (a scale, a count of bad values, the largest level) as arguments: each implementation gathers
// them where its payload lives.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "gradgate/base/status.h"
#include "gradgate/kernels/frame.h"

namespace gradgate::kernels {

/// kMalformedFrame naming the frame's codec, tensor and step, and what is wrong.
Status malformed_frame(const FrameView& frame, const std::string& what);

namespace element_frames {

/// Bytes of the f32 scale that starts qsgd and sign payloads.
inline constexpr size_t kScaleBytes = 4;

/// none: element_count fp32 values.
size_t none_frame_bytes(uint64_t elements);
Status check_none(const FrameView& frame);

/// fp16, bf16: element_count 16-bit values.
size_t half_frame_bytes(uint64_t elements);
Status check_half(const FrameView& frame);

/// none, fp16, bf16: the error for a payload holding `nonfinite` NaN or infinite values, if any.
Status check_finite_values(const FrameView& frame, size_t nonfinite);

/// qsgd: [f32 scale][element_count integers of width() bytes].
/// param: bits (bits 0-7) | headroom bits (8-15) | summands, the frames summed into it (16-31).
struct QsgdLayout {
  int bits = 0;
  int headroom = 0;
  uint32_t summands = 0;

  int levels() const { return (1 << bits) - 1; }
  /// The frames a sum may hold: what the headroom bits allow, and what the param's 16-bit
  /// summand field can say (65535, one short of 16 headroom bits).
  uint32_t max_summands() const { return std::min(1u << headroom, 0xFFFFu); }
  size_t width() const;
  uint32_t param() const {
    return static_cast<uint32_t>(bits) | static_cast<uint32_t>(headroom) << 8 | summands << 16;
  }
  static QsgdLayout from_param(uint32_t param) {
    return {static_cast<int>(param & 0xFF), static_cast<int>((param >> 8) & 0xFF), param >> 16};
  }
};

size_t qsgd_frame_bytes(const QsgdLayout& layout, uint64_t elements);
/// The layout of a qsgd frame, after checking its flags, bit widths, summands and payload size.
Result<QsgdLayout> check_qsgd(const FrameView& frame);
/// Checks the frame's scale and its largest |level| against the layout.
Status check_qsgd_values(const FrameView& frame, const QsgdLayout& layout, float scale,
                         uint64_t max_abs_level);
/// Whether levels up to `max_abs_level` decode to finite floats: frames summed near the float
/// range can leave it, as an fp32 all-reduce of the same values would.
bool qsgd_decodes_finite(const QsgdLayout& layout, float scale, uint64_t max_abs_level);
/// The layout of the sum of frames a and b (with scales scale_a, scale_b), or the error that
/// forbids adding them; `spec` names the codec in the message.
Result<QsgdLayout> qsgd_sum_layout(const std::string& spec, const QsgdLayout& a,
                                   const QsgdLayout& b, float scale_a, float scale_b);

/// sign: [f32 scale][ceil(n / 8) bytes, bit i % 8 of byte i / 8 set = element i positive].
size_t sign_frame_bytes(uint64_t elements);
Status check_sign(const FrameView& frame);
/// Checks the scale and that the bits after the last element (in `last_byte`) are clear.
Status check_sign_values(const FrameView& frame, float scale, uint8_t last_byte);

}  // namespace element_frames
}  // namespace gradgate::kernels
