// sign: scaled 1-bit sign with error feedback (EF-SignSGD, Karimireddy et al. 2019). Each element
// becomes +scale or -scale with scale = mean |grad + residual|; 32x smaller than fp32.
//
// Payload: [f32 scale][ceil(n / 8) bytes, bit i % 8 of byte i / 8 set = element i positive]
// Not summable: every worker has its own scale.
#include <cmath>
#include <vector>

#include "codecs.h"
#include "element_frames.h"
#include "gradgate/kernels/wire_io.h"
#include "loops.h"

namespace gradgate::kernels::cpu {
namespace {

using element_frames::kScaleBytes;

class SignCodec final : public CpuCodec {
 public:
  using CpuCodec::CpuCodec;

  size_t max_frame_bytes(const TensorDesc& desc) const override {
    return element_frames::sign_frame_bytes(desc.elements);
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
      return overflow("mean |gradient| of tensor " + std::to_string(stream.desc().tensor_id) +
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
    GRADGATE_RETURN_IF_ERROR(element_frames::check_sign(frame));
    const float scale = wire::load<float>(frame.payload.data());
    const auto* bits = reinterpret_cast<const uint8_t*>(frame.payload.data() + kScaleBytes);
    GRADGATE_RETURN_IF_ERROR(element_frames::check_sign_values(
        frame, scale, bits[frame.payload.size() - kScaleBytes - 1]));
    loops().add_sign(bits, scale, acc.data(), acc.size());
    return {};
  }
};

}  // namespace

Result<std::unique_ptr<Codec>> make_sign_codec(const CodecParams& params) {
  return std::unique_ptr<Codec>(std::make_unique<SignCodec>(params));
}

}  // namespace gradgate::kernels::cpu
