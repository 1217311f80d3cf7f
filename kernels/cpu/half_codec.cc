// fp16 and bf16: the gradient rounded to 16 bits (round-to-nearest-even), with the rounding error
// kept in the residual. Summable: frames add in fp32 and round back, as PyTorch's fp16 hook does
// (fp16 sums beyond +-65504 are reported as an error rather than sent as infinity). Without a
// residual, a gradient value beyond the format's range is such an error too (element_rules.h).
#include <vector>

#include "codecs.h"
#include "element_frames.h"
#include "loops.h"

namespace gradgate::kernels::cpu {
namespace {

class HalfCodec final : public CpuCodec {
 public:
  explicit HalfCodec(const CodecParams& params)
      : CpuCodec(params), bf16_(params.id == CodecId::kBf16) {}

  size_t max_frame_bytes(const TensorDesc& desc) const override {
    return element_frames::half_frame_bytes(desc.elements);
  }

  Result<size_t> encode(int round, const StepContext& ctx, std::span<const float> grad,
                        Stream& stream, std::span<std::byte> out) const override {
    const size_t bytes = max_frame_bytes(stream.desc());
    GRADGATE_RETURN_IF_ERROR(check_encode(round, ctx, grad, stream, out, bytes));
    auto* payload = reinterpret_cast<uint16_t*>(out.data() + kFrameHeaderBytes);
    float* residual = stream.residual().empty() ? nullptr : stream.residual().data();
    const auto encode_loop = bf16_ ? loops().encode_bf16 : loops().encode_fp16;
    if (const size_t bad = encode_loop(grad.data(), residual, payload, grad.size()); bad != 0) {
      if (residual) {
        std::vector<float> decoded(grad.size(), 0.0f);
        add_loop()(payload, decoded.data(), decoded.size());
        restore_residual(grad, decoded, stream.residual());
      }
      return nonfinite_gradient(stream, bad, residual == nullptr);
    }
    return seal(round, ctx, stream, bytes, out);
  }

  Status decode_accumulate(const FrameView& frame, const Stream*,
                           std::span<float> acc) const override {
    GRADGATE_RETURN_IF_ERROR(check_decode(frame, acc));
    GRADGATE_RETURN_IF_ERROR(check_payload(frame));
    add_loop()(values(frame), acc.data(), acc.size());
    return {};
  }

  Result<size_t> add_frames(const FrameView& a, const FrameView& b,
                            std::span<std::byte> out) const override {
    const size_t bytes = kFrameHeaderBytes + a.payload.size();
    GRADGATE_RETURN_IF_ERROR(check_add(a, b, out, bytes));
    GRADGATE_RETURN_IF_ERROR(check_payload(a));
    GRADGATE_RETURN_IF_ERROR(check_payload(b));
    const auto sum_loop = bf16_ ? loops().sum_bf16 : loops().sum_fp16;
    auto* sum = reinterpret_cast<uint16_t*>(out.data() + kFrameHeaderBytes);
    if (sum_loop(values(a), values(b), sum, a.header.element_count) != 0) {
      return sum_overflow("16-bit");
    }
    seal_frame(a.header, out);
    return bytes;
  }

 private:
  using AddLoop = void (*)(const uint16_t*, float*, size_t);
  AddLoop add_loop() const { return bf16_ ? loops().add_bf16 : loops().add_fp16; }

  static const uint16_t* values(const FrameView& frame) {
    return reinterpret_cast<const uint16_t*>(frame.payload.data());
  }

  Status check_payload(const FrameView& frame) const {
    GRADGATE_RETURN_IF_ERROR(element_frames::check_half(frame));
    const auto count_bad = bf16_ ? loops().count_nonfinite_bf16 : loops().count_nonfinite_fp16;
    return element_frames::check_finite_values(
        frame, count_bad(values(frame), frame.header.element_count));
  }

  bool bf16_;
};

}  // namespace

Result<std::unique_ptr<Codec>> make_half_codec(const CodecParams& params) {
  return std::unique_ptr<Codec>(std::make_unique<HalfCodec>(params));
}

}  // namespace gradgate::kernels::cpu
