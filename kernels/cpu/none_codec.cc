// none: the gradient as fp32, lossless; the reference every other codec is measured against.
#include "codecs.h"
#include "loops.h"

namespace gradgate::kernels::cpu {
namespace {

class NoneCodec final : public CpuCodec {
 public:
  using CpuCodec::CpuCodec;

  bool summable() const override { return true; }

  size_t max_frame_bytes(const TensorDesc& desc) const override {
    return kFrameHeaderBytes + desc.elements * sizeof(float);
  }

  Result<size_t> encode(int round, const StepContext& ctx, std::span<const float> grad,
                        Stream& stream, std::span<std::byte> out) const override {
    const size_t bytes = max_frame_bytes(stream.desc());
    GRADGATE_RETURN_IF_ERROR(check_encode(round, ctx, grad, stream, out, bytes));
    auto* payload = reinterpret_cast<float*>(out.data() + kFrameHeaderBytes);
    if (const size_t bad = loops().copy_checked(grad.data(), payload, grad.size()); bad != 0) {
      return nonfinite_gradient(stream, bad);
    }
    return seal(round, ctx, stream, bytes, out);
  }

  Status decode_accumulate(const FrameView& frame, const Stream*,
                           std::span<float> acc) const override {
    GRADGATE_RETURN_IF_ERROR(check_decode(frame, acc));
    GRADGATE_RETURN_IF_ERROR(check_payload(frame));
    loops().add(values(frame), acc.data(), acc.size());
    return {};
  }

  Result<size_t> add_frames(const FrameView& a, const FrameView& b,
                            std::span<std::byte> out) const override {
    const size_t bytes = kFrameHeaderBytes + a.payload.size();
    GRADGATE_RETURN_IF_ERROR(check_add(a, b, out, bytes));
    GRADGATE_RETURN_IF_ERROR(check_payload(a));
    GRADGATE_RETURN_IF_ERROR(check_payload(b));
    loops().sum(values(a), values(b), reinterpret_cast<float*>(out.data() + kFrameHeaderBytes),
                a.header.element_count);
    seal_frame(a.header, out);
    return bytes;
  }

 private:
  static const float* values(const FrameView& frame) {
    return reinterpret_cast<const float*>(frame.payload.data());
  }

  static Status check_payload(const FrameView& frame) {
    if (frame.header.flags != 0 || frame.header.param != 0) {
      return malformed(frame, "unknown flags or param");
    }
    if (frame.payload.size() != frame.header.element_count * sizeof(float)) {
      return malformed(frame, "payload is not element_count fp32 values");
    }
    if (loops().count_nonfinite(values(frame), frame.header.element_count) != 0) {
      return malformed(frame, "payload holds NaN or infinite values");
    }
    return {};
  }
};

}  // namespace

std::unique_ptr<Codec> make_none_codec(const CodecParams& params) {
  return std::make_unique<NoneCodec>(params);
}

}  // namespace gradgate::kernels::cpu
