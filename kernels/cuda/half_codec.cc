// fp16 and bf16 on the GPU: one pass reads the gradient and residual and writes the payload, its
// checksum and the new residual.
#include "codecs.h"
#include "cuda_codec.h"
#include "element_frames.h"

namespace gradgate::kernels::cuda {
namespace {

class HalfCodec final : public CudaCodec {
 public:
  explicit HalfCodec(const CodecParams& params)
      : CudaCodec(params),
        format_(params.id == CodecId::kBf16 ? HalfFormat::kBf16 : HalfFormat::kFp16) {}

  size_t max_frame_bytes(const TensorDesc& desc) const override {
    return element_frames::half_frame_bytes(desc.elements);
  }

  Result<size_t> encode(int round, const StepContext& ctx, std::span<const float> grad,
                        Stream& stream, std::span<std::byte> out) const override {
    const size_t bytes = max_frame_bytes(stream.desc());
    auto call = begin_encode(round, ctx, grad, stream, out, bytes, 0);
    if (!call.ok()) return call.status();
    auto* payload = frame_at<uint16_t>(out, kFrameHeaderBytes);
    GRADGATE_RETURN_IF_ERROR(launch_seal_header(out.data(), call->header, {}, call->cuda));
    GRADGATE_RETURN_IF_ERROR(launch_half_encode(format_, grad.data(), call->residual, payload,
                                                grad.size(), call->sink, call->tally(),
                                                call->cuda));
    auto tally = call->scratch->finish(call->cuda);
    if (!tally.ok()) return tally.status();
    if (tally->count[0] == 0) return bytes;
    if (call->residual) {
      GRADGATE_RETURN_IF_ERROR(launch_half_restore(format_, grad.data(), payload, call->residual,
                                                   grad.size(), call->cuda));
      GRADGATE_RETURN_IF_ERROR(call->scratch->finish(call->cuda).status());
    }
    return nonfinite_gradient(stream, tally->count[0], call->residual == nullptr);
  }

  Result<size_t> add_frames(const FrameView& a, const FrameView& b,
                            std::span<std::byte> out) const override {
    auto call = begin_add(a, b, out, 0, element_frames::check_half);
    if (!call.ok()) return call.status();
    GRADGATE_RETURN_IF_ERROR(launch_seal_header(out.data(), a.header, {}, call->cuda));
    GRADGATE_RETURN_IF_ERROR(
        launch_half_sum(format_, values(a), values(b), frame_at<uint16_t>(out, kFrameHeaderBytes),
                        a.header.element_count, call->sink, call->tally(), call->cuda));
    auto tally = finish_add(*call, a, b);
    if (!tally.ok()) return tally.status();
    if (tally->count[2] != 0) {
      return sum_overflow("16-bit");
    }
    return call->bytes;
  }

 private:
  static const uint16_t* values(const FrameView& frame) { return payload_at<uint16_t>(frame); }

  Status decode_into(const FrameView& frame, const Stream*, std::span<float> out,
                     bool overwrite) const override {
    GRADGATE_RETURN_IF_ERROR(check_decode(frame, out));
    GRADGATE_RETURN_IF_ERROR(element_frames::check_half(frame));
    GRADGATE_RETURN_IF_ERROR(check_aligned(frame));
    return decode_floats(
        frame, overwrite,
        [&](const Call& call) {
          return launch_half_count_nonfinite(format_, values(frame), out.size(), call.tally(),
                                             call.cuda);
        },
        [&](const Call& call, bool replace) {
          return launch_half_decode(format_, values(frame), out.data(), out.size(), replace,
                                    call.tally(), call.cuda);
        });
  }

  HalfFormat format_;
};

}  // namespace

Result<std::unique_ptr<Codec>> make_half_codec(const CodecParams& params) {
  return std::unique_ptr<Codec>(std::make_unique<HalfCodec>(params));
}

}  // namespace gradgate::kernels::cuda
