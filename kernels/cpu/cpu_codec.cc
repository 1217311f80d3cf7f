#include "cpu_codec.h"

namespace gradgate::kernels::cpu {

Result<std::unique_ptr<Stream>> CpuCodec::make_stream(const TensorDesc& desc) const {
  if (desc.elements == 0 || desc.elements > kMaxFrameElements) {
    return Status(ErrorCode::kInvalidArgument, "tensor of " + std::to_string(desc.elements) +
                                                   " elements is out of range [1, 2^32)");
  }
  return std::unique_ptr<Stream>(std::make_unique<Stream>(desc, keeps_residual()));
}

Status CpuCodec::check_encode(int round, const StepContext& ctx, std::span<const float> grad,
                              const Stream& stream, std::span<std::byte> out,
                              size_t frame_bytes) const {
  if (round < 0 || round >= rounds()) {
    return Status(ErrorCode::kInvalidArgument,
                  spec() + ": round " + std::to_string(round) + " is out of range");
  }
  if (ctx.memory == MemoryKind::kDevice) {
    return Status(ErrorCode::kUnsupported, spec() + ": the CPU codec cannot read device memory");
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

FrameHeader CpuCodec::header_of(int round, const StepContext& ctx, const Stream& stream,
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

size_t CpuCodec::seal(int round, const StepContext& ctx, const Stream& stream, size_t frame_bytes,
                      std::span<std::byte> out, uint8_t flags, uint32_t param) const {
  seal_frame(header_of(round, ctx, stream, frame_bytes, flags, param), out);
  return frame_bytes;
}

Status CpuCodec::check_decode(const FrameView& frame, std::span<float> acc) const {
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

Status CpuCodec::check_add(const FrameView& a, const FrameView& b, std::span<std::byte> out,
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

Status CpuCodec::malformed(const FrameView& frame, const std::string& what) {
  return Status(ErrorCode::kMalformedFrame, std::string(codec_name(frame.header.codec)) +
                                                " frame (job " +
                                                std::to_string(frame.header.job_id) + ", tensor " +
                                                std::to_string(frame.header.tensor_id) + ", step " +
                                                std::to_string(frame.header.step) + "): " + what);
}

Status CpuCodec::nonfinite_gradient(const Stream& stream, size_t count) {
  return Status(ErrorCode::kInvalidArgument,
                "gradient of tensor " + std::to_string(stream.desc().tensor_id) + " (job " +
                    std::to_string(stream.desc().job_id) + ") has " + std::to_string(count) +
                    " NaN or infinite values; nothing was encoded");
}

}  // namespace gradgate::kernels::cpu
