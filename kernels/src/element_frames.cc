#include "element_frames.h"

#include <bit>
#include <cmath>

#include "gradgate/kernels/codec_spec.h"
#include "gradgate/kernels/element_rules.h"

namespace gradgate::kernels {

Status malformed_frame(const FrameView& frame, const std::string& what) {
  return Status(ErrorCode::kMalformedFrame, std::string(codec_name(frame.header.codec)) +
                                                " frame (job " +
                                                std::to_string(frame.header.job_id) + ", tensor " +
                                                std::to_string(frame.header.tensor_id) + ", step " +
                                                std::to_string(frame.header.step) + "): " + what);
}

namespace element_frames {
namespace {

Status check_no_flags_or_param(const FrameView& frame) {
  if (frame.header.flags != 0 || frame.header.param != 0) {
    return malformed_frame(frame, "unknown flags or param");
  }
  return {};
}

Status check_scale(const FrameView& frame, float scale) {
  if (!std::isfinite(scale) || scale < 0.0f) {
    return malformed_frame(frame, "scale is NaN, infinite or negative");
  }
  return {};
}

}  // namespace

size_t none_frame_bytes(uint64_t elements) { return kFrameHeaderBytes + elements * sizeof(float); }

Status check_none(const FrameView& frame) {
  GRADGATE_RETURN_IF_ERROR(check_no_flags_or_param(frame));
  if (frame.payload.size() != frame.header.element_count * sizeof(float)) {
    return malformed_frame(frame, "payload is not element_count fp32 values");
  }
  return {};
}

size_t half_frame_bytes(uint64_t elements) {
  return kFrameHeaderBytes + elements * sizeof(uint16_t);
}

Status check_half(const FrameView& frame) {
  GRADGATE_RETURN_IF_ERROR(check_no_flags_or_param(frame));
  if (frame.payload.size() != frame.header.element_count * sizeof(uint16_t)) {
    return malformed_frame(frame, "payload is not element_count 16-bit values");
  }
  return {};
}

Status check_finite_values(const FrameView& frame, size_t nonfinite) {
  if (nonfinite != 0) return malformed_frame(frame, "payload holds NaN or infinite values");
  return {};
}

size_t QsgdLayout::width() const { return qsgd_level_bytes(bits, headroom); }

size_t qsgd_frame_bytes(const QsgdLayout& layout, uint64_t elements) {
  return kFrameHeaderBytes + kScaleBytes + elements * layout.width();
}

Result<QsgdLayout> check_qsgd(const FrameView& frame) {
  if (frame.header.flags != 0) return malformed_frame(frame, "unknown flags");
  const QsgdLayout layout = QsgdLayout::from_param(frame.header.param);
  if (layout.bits < 1 || layout.bits > 15 || layout.headroom > 16 ||
      layout.bits + 1 + layout.headroom > 32) {
    return malformed_frame(frame, "bit widths out of range");
  }
  if (layout.summands < 1 || layout.summands > layout.max_summands()) {
    return malformed_frame(frame, "summand count exceeds the reserved headroom");
  }
  if (frame.payload.size() != kScaleBytes + frame.header.element_count * layout.width()) {
    return malformed_frame(frame, "payload is not a scale and element_count integers");
  }
  return layout;
}

Status check_qsgd_values(const FrameView& frame, const QsgdLayout& layout, float scale,
                         uint64_t max_abs_level) {
  GRADGATE_RETURN_IF_ERROR(check_scale(frame, scale));
  const uint64_t bound =
      static_cast<uint64_t>(layout.summands) * static_cast<uint64_t>(layout.levels());
  if (max_abs_level > bound)
    return malformed_frame(frame, "a level exceeds summands * (2^bits - 1)");
  return {};
}

bool qsgd_decodes_finite(const QsgdLayout& layout, float scale, uint64_t max_abs_level) {
  const rules::QsgdGrid grid = rules::qsgd_grid(scale, layout.levels());
  return rules::finite(rules::qsgd_value(static_cast<int32_t>(max_abs_level), grid.to_value));
}

Result<QsgdLayout> qsgd_sum_layout(const std::string& spec, const QsgdLayout& a,
                                   const QsgdLayout& b, float scale_a, float scale_b) {
  if (a.bits != b.bits || a.headroom != b.headroom ||
      std::bit_cast<uint32_t>(scale_a) != std::bit_cast<uint32_t>(scale_b)) {
    return Status(ErrorCode::kIncompatible, spec + ": frames differ in bits or scale");
  }
  QsgdLayout sum = a;
  sum.summands = a.summands + b.summands;
  if (sum.summands > sum.max_summands()) {
    return Status(ErrorCode::kResourceExhausted,
                  spec + ": summing " + std::to_string(sum.summands) + " frames exceeds the " +
                      std::to_string(sum.max_summands()) + " that a sum may hold (headroom of " +
                      std::to_string(sum.headroom) + " bits)");
  }
  return sum;
}

size_t sign_frame_bytes(uint64_t elements) {
  return kFrameHeaderBytes + kScaleBytes + (elements + 7) / 8;
}

Status check_sign(const FrameView& frame) {
  GRADGATE_RETURN_IF_ERROR(check_no_flags_or_param(frame));
  if (frame.payload.size() != kScaleBytes + (frame.header.element_count + 7) / 8) {
    return malformed_frame(frame, "payload is not a scale and ceil(n/8) sign bytes");
  }
  return {};
}

Status check_sign_values(const FrameView& frame, float scale, uint8_t last_byte) {
  GRADGATE_RETURN_IF_ERROR(check_scale(frame, scale));
  const uint64_t n = frame.header.element_count;
  if (n % 8 != 0 && (last_byte >> (n % 8)) != 0) {
    return malformed_frame(frame, "padding bits after the last element are set");
  }
  return {};
}

}  // namespace element_frames
}  // namespace gradgate::kernels
