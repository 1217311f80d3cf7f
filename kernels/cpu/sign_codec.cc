// sign: scaled 1-bit sign with error feedback (EF-SignSGD, Karimireddy et al. 2019). Each element
// becomes +scale or -scale with scale = mean |grad + residual|; 32x smaller than fp32.
//
// Payload: [f32 scale][ceil(n / 8) bytes, bit i % 8 of byte i / 8 set = element i positive]
// Not summable: every worker has its own scale.
#include <cmath>
#include <vector>

#include "codecs.h"
#include "loops.h"
#include "gradgate/kernels/wire_io.h"

namespace gradgate::kernels::cpu {
namespace {

constexpr size_t kScaleBytes = 4;

class SignCodec final : public CpuCodec {
 public:
  using CpuCodec::CpuCodec;

  bool summable() const override { return false; }

  size_t max_frame_bytes(const TensorDesc& desc) const override {
    return kFrameHeaderBytes + kScaleBytes + (desc.elements + 7) / 8;
  }

  Result<size_t> encode(int round, const StepContext& ctx, std::span<const float> grad,
                        Stream& stream, std::span<std::byte> out) const override {
    const size_t bytes = max_frame_bytes(stream.desc());
    GRADGATE_RETURN_IF_ERROR(check_encode(round, ctx, grad, stream, out, bytes));
    float* residual = stream.residual().empty() ? nullptr : stream.residual().data();
    const size_t n = grad.size();
    const AbsStats stats = loops().abs_stats(grad.data(), residual, n);
    if (stats.nonfinite != 0) return nonfinite_gradient(stream, stats.nonfinite);
    const auto scale = static_cast<float>(stats.abs_sum / static_cast<double>(n));
    if (!std::isfinite(scale)) {
      return Status(ErrorCode::kInvalidArgument, spec() + ": mean |gradient| of tensor " +
                                                     std::to_string(stream.desc().tensor_id) +
                                                     " overflows fp32; nothing was encoded");
    }
    std::byte* payload = out.data() + kFrameHeaderBytes;
    wire::store<float>(payload, scale);
    loops().encode_sign(grad.data(), residual, reinterpret_cast<uint8_t*>(payload + kScaleBytes), n,
                        scale);
    return seal(round, ctx, stream, bytes, out);
  }

  Status decode_accumulate(const FrameView& frame, const Stream*,
                           std::span<float> acc) const override {
    GRADGATE_RETURN_IF_ERROR(check_decode(frame, acc));
    const uint64_t n = frame.header.element_count;
    if (frame.header.flags != 0 || frame.header.param != 0) {
      return malformed(frame, "unknown flags or param");
    }
    if (frame.payload.size() != kScaleBytes + (n + 7) / 8) {
      return malformed(frame, "payload is not a scale and ceil(n/8) sign bytes");
    }
    const float scale = wire::load<float>(frame.payload.data());
    if (!std::isfinite(scale) || scale < 0.0f) {
      return malformed(frame, "scale is NaN, infinite or negative");
    }
    const auto* bits = reinterpret_cast<const uint8_t*>(frame.payload.data() + kScaleBytes);
    if (n % 8 != 0 && (bits[n / 8] >> (n % 8)) != 0) {
      return malformed(frame, "padding bits after the last element are set");
    }
    loops().add_sign(bits, scale, acc.data(), acc.size());
    return {};
  }
};

}  // namespace

std::unique_ptr<Codec> make_sign_codec(const CodecParams& params) {
  return std::make_unique<SignCodec>(params);
}

}  // namespace gradgate::kernels::cpu
