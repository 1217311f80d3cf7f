// Shared plumbing of the codec implementations, CPU and CUDA: parameters, the argument checks
// common to every encode, decode and add, frame headers, and uniform error messages that name the
// codec, tensor and step.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "gradgate/kernels/codec.h"
#include "gradgate/kernels/codec_spec.h"

namespace gradgate::kernels {

class CodecBase : public Codec {
 public:
  /// `device`: the codec reads and writes device memory (ctx.memory == kDevice) rather than host
  /// or pinned memory.
  CodecBase(const CodecParams& params, bool device) : params_(params), device_(device) {}

  CodecId id() const final { return params_.id; }
  bool summable() const final { return codec_traits(params_.id).summable; }
  std::string spec() const final { return format_codec_spec(params_); }

 protected:
  const CodecParams& params() const { return params_; }
  bool keeps_residual() const { return codec_traits(params_.id).lossy && params_.error_feedback; }

  /// kInvalidArgument unless the tensor has 1 to 2^32 - 1 elements and its largest frame fits the
  /// 4 GiB payload limit of the header's 32-bit payload_bytes.
  Status check_tensor(const TensorDesc& desc) const;
  /// Checks round, memory kind, gradient length and that `out` holds `frame_bytes`.
  Status check_encode(int round, const StepContext& ctx, std::span<const float> grad,
                      const Stream& stream, std::span<std::byte> out, size_t frame_bytes) const;
  /// Writes this stream's header for `round` (with `flags` and `param`) in front of the payload
  /// at out[48, frame_bytes) and seals the frame with its CRC. Returns frame_bytes.
  size_t seal(int round, const StepContext& ctx, const Stream& stream, size_t frame_bytes,
              std::span<std::byte> out, uint8_t flags = 0, uint32_t param = 0) const;
  /// The header seal() writes, for codecs that seal block by block (write_frame_header).
  FrameHeader header_of(int round, const StepContext& ctx, const Stream& stream, size_t frame_bytes,
                        uint8_t flags = 0, uint32_t param = 0) const;
  /// Checks that the frame is of this codec and `acc` has its element count.
  Status check_decode(const FrameView& frame, std::span<float> acc) const;
  /// Checks that `summed` is a frame of this codec for `round`, a round of the codec.
  Status check_absorb(int round, const FrameView& summed) const;
  /// Checks that a and b are frames of this codec for the same stream with the same flags and
  /// payload size, and that `out` holds `frame_bytes`. Params are the codec's to compare.
  Status check_add(const FrameView& a, const FrameView& b, std::span<std::byte> out,
                   size_t frame_bytes) const;

  /// kMalformedFrame naming the frame's codec, tensor and step, and what is wrong.
  static Status malformed(const FrameView& frame, const std::string& what);
  /// kNonFiniteGradient for a gradient with `count` NaN or infinite values; with
  /// `beyond_16_bit`, the count of an fp16 or bf16 encode without a residual, which also counts
  /// the values beyond the format's range (rules::half_sendable), and says so.
  static Status nonfinite_gradient(const Stream& stream, size_t count, bool beyond_16_bit = false);
  /// kNonFiniteGradient for finite values whose encoding or sum leaves the range of the codec's
  /// numbers (`what` says where): the step's result would not be finite, as an all-reduce of the
  /// same values in that format would overflow.
  Status overflow(const std::string& what) const;
  /// overflow() for a sum of finite frames that leaves the `range` ("float", "16-bit") of the
  /// payload's numbers.
  Status sum_overflow(std::string_view range) const;

 private:
  CodecParams params_;
  bool device_;
};

}  // namespace gradgate::kernels
