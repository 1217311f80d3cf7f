#include "codec_base.h"

#include <cstdint>
#include <limits>
#include <string>

#include "element_frames.h"

namespace gradgate::kernels {

Status CodecBase::check_tensor(const TensorDesc& desc) const {
  if (desc.elements == 0 || desc.elements > kMaxFrameElements) {
    return Status(ErrorCode::kInvalidArgument, "tensor of " + std::to_string(desc.elements) +
                                                   " elements is out of range [1, 2^32)");
  }
  const uint64_t payload = max_frame_bytes(desc) - kFrameHeaderBytes;
  if (payload > std::numeric_limits<uint32_t>::max()) {
    return Status(ErrorCode::kInvalidArgument,
                  spec() + ": a tensor of " + std::to_string(desc.elements) +
                      " elements makes frames of up to " + std::to_string(payload) +
                      " payload bytes, beyond the 4 GiB limit of a frame");
  }
  return {};
}

Status CodecBase::check_encode(int round, const StepContext& ctx, std::span<const float> grad,
                               const Stream& stream, std::span<std::byte> out,
                               size_t frame_bytes) const {
  if (round < 0 || round >= rounds()) {
    return Status(ErrorCode::kInvalidArgument,
                  spec() + ": round " + std::to_string(round) + " is out of range");
  }
  if ((ctx.memory == MemoryKind::kDevice) != device_) {
    return Status(ErrorCode::kUnsupported,
                  spec() + (device_ ? ": the CUDA codec reads only device memory"
                                    : ": the CPU codec cannot read device memory"));
  }
  if (grad.size() != stream.desc().elements) {
    return Status(ErrorCode::kInvalidArgument, spec() + ": gradient has " +
                                                   std::to_string(grad.size()) +
                                                   " elements but the stream was made for " +
                                                   std::to_string(stream.desc().elements));
  }
  if (out.size() < frame_bytes) {
    return Status(ErrorCode::kResourceExhausted,
                  spec() + ": output buffer of " + std::to_string(out.size()) +
                      " bytes is smaller than the frame (" + std::to_string(frame_bytes) + ")");
  }
  return {};
}

FrameHeader CodecBase::header_of(int round, const StepContext& ctx, const Stream& stream,
                                 size_t frame_bytes, uint8_t flags, uint32_t param) const {
  FrameHeader h;
  h.codec = params_.id;
  h.round = static_cast<uint8_t>(round);
  h.flags = flags;
  h.tensor_id = stream.desc().tensor_id;
  h.job_id = stream.desc().job_id;
  h.step = ctx.step;
  h.element_count = stream.desc().elements;
  h.policy_version = ctx.policy_version;
  h.param = param;
  h.payload_bytes = static_cast<uint32_t>(frame_bytes - kFrameHeaderBytes);
  return h;
}

size_t CodecBase::seal(int round, const StepContext& ctx, const Stream& stream, size_t frame_bytes,
                       std::span<std::byte> out, uint8_t flags, uint32_t param) const {
  seal_frame(header_of(round, ctx, stream, frame_bytes, flags, param), out);
  return frame_bytes;
}

Status CodecBase::check_decode(const FrameView& frame, std::span<float> acc) const {
  if (frame.header.codec != params_.id) {
    return Status(
        ErrorCode::kIncompatible,
        spec() + ": cannot decode a " + std::string(codec_name(frame.header.codec)) + " frame");
  }
  if (frame.header.round >= rounds()) return malformed(frame, "round out of range");
  if (acc.size() != frame.header.element_count) {
    return Status(ErrorCode::kInvalidArgument,
                  spec() + ": output has " + std::to_string(acc.size()) +
                      " elements but the frame has " + std::to_string(frame.header.element_count));
  }
  return {};
}

Status CodecBase::check_absorb(int round, const FrameView& summed) const {
  if (summed.header.codec != params_.id) {
    return Status(
        ErrorCode::kIncompatible,
        spec() + ": cannot absorb a " + std::string(codec_name(summed.header.codec)) + " frame");
  }
  if (round < 0 || round >= rounds() || summed.header.round != round) {
    return Status(ErrorCode::kInvalidArgument, spec() + ": absorb of round " +
                                                   std::to_string(round) + " was given a round " +
                                                   std::to_string(summed.header.round) + " frame");
  }
  return {};
}

Status CodecBase::check_add(const FrameView& a, const FrameView& b, std::span<std::byte> out,
                            size_t frame_bytes) const {
  if (a.header.codec != params_.id) {
    return Status(ErrorCode::kIncompatible,
                  spec() + ": cannot add " + std::string(codec_name(a.header.codec)) + " frames");
  }
  GRADGATE_RETURN_IF_ERROR(check_same_stream(a.header, b.header));
  if (a.header.flags != b.header.flags || a.payload.size() != b.payload.size()) {
    return Status(ErrorCode::kIncompatible, spec() + ": frames differ in flags or payload size");
  }
  if (out.size() < frame_bytes) {
    return Status(ErrorCode::kResourceExhausted,
                  spec() + ": output buffer of " + std::to_string(out.size()) +
                      " bytes is smaller than the frame (" + std::to_string(frame_bytes) + ")");
  }
  return {};
}

Status CodecBase::malformed(const FrameView& frame, const std::string& what) {
  return malformed_frame(frame, what);
}

Status CodecBase::overflow(const std::string& what) const {
  return Status(ErrorCode::kNonFiniteGradient, spec() + ": " + what);
}

Status CodecBase::sum_overflow(std::string_view range) const {
  return overflow("sum of frames overflows the " + std::string(range) + " range");
}

Status CodecBase::nonfinite_gradient(const Stream& stream, size_t count, bool beyond_16_bit) {
  return Status(ErrorCode::kNonFiniteGradient,
                "gradient of tensor " + std::to_string(stream.desc().tensor_id) + " (job " +
                    std::to_string(stream.desc().job_id) + ") has " + std::to_string(count) +
                    " NaN or infinite values; nothing was encoded" +
                    (beyond_16_bit ? " (without error feedback, a value beyond the 16-bit "
                                     "format's range counts as infinite, as cast to it)"
                                   : ""));
}

}  // namespace gradgate::kernels
