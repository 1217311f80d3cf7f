// sign on the GPU: a read-only pass for the scale (the mean |grad + residual|, summed in the order
// every implementation follows), then one pass that writes the bitmap, its checksum and the
// residual. Not summable.
#include <cmath>
#include <string>

#include "codecs.h"
#include "cuda_codec.h"
#include "element_frames.h"
#include "gradgate/kernels/element_rules.h"
#include "gradgate/kernels/half.h"

namespace gradgate::kernels::cuda {
namespace {

using element_frames::kScaleBytes;

class SignCodec final : public CudaCodec {
 public:
  using CudaCodec::CudaCodec;

  size_t max_frame_bytes(const TensorDesc& desc) const override {
    return element_frames::sign_frame_bytes(desc.elements);
  }

  Result<size_t> encode(int round, const StepContext& ctx, std::span<const float> grad,
                        Stream& stream, std::span<std::byte> out) const override {
    const size_t bytes = max_frame_bytes(stream.desc());
    auto call = begin_encode(round, ctx, grad, stream, out, bytes, kScaleBytes);
    if (!call.ok()) return call.status();
    call->stream->set_last_encode_passes(2);  // the read-only pass for the scale first
    const size_t n = grad.size();
    auto sums = call->scratch->area((n + rules::kSumBlock - 1) / rules::kSumBlock * sizeof(double));
    if (!sums.ok()) return sums.status();
    GRADGATE_RETURN_IF_ERROR(launch_abs_stats(
        grad.data(), call->residual, n, static_cast<double*>(*sums), call->tally(), call->cuda));
    auto stats = call->scratch->finish(call->cuda);
    if (!stats.ok()) return stats.status();
    if (stats->count[0] != 0) return nonfinite_gradient(stream, stats->count[0]);
    const auto scale = static_cast<float>(stats->sum / static_cast<double>(n));
    if (!std::isfinite(scale)) {
      return overflow("mean |gradient| of tensor " + std::to_string(stream.desc().tensor_id) +
                      " overflows fp32; nothing was encoded");
    }
    GRADGATE_RETURN_IF_ERROR(
        launch_seal_header(out.data(), call->header, {kScaleBytes, float_bits(scale)}, call->cuda));
    GRADGATE_RETURN_IF_ERROR(
        launch_sign_encode(grad.data(), call->residual,
                           reinterpret_cast<uint8_t*>(out.data() + kFrameHeaderBytes + kScaleBytes),
                           n, scale, call->sink, call->cuda));
    GRADGATE_RETURN_IF_ERROR(call->scratch->finish(call->cuda).status());
    return bytes;
  }

 private:
  // decode (overwrite: out = decoded, checked after) or decode_accumulate (checked first).
  Status decode_into(const FrameView& frame, const Stream*, std::span<float> out,
                     bool overwrite) const override {
    GRADGATE_RETURN_IF_ERROR(check_decode(frame, out));
    GRADGATE_RETURN_IF_ERROR(element_frames::check_sign(frame));
    GRADGATE_RETURN_IF_ERROR(check_aligned(frame));
    auto call = begin_call();
    if (!call.ok()) return call.status();
    const auto* scale = payload_at<float>(frame);
    const auto* bits = payload_at<uint8_t>(frame, kScaleBytes);
    GRADGATE_RETURN_IF_ERROR(call->scratch->copy_word(0, scale, kScaleBytes, call->cuda));
    GRADGATE_RETURN_IF_ERROR(call->scratch->copy_word(
        1, frame.payload.data() + frame.payload.size() - 1, 1, call->cuda));
    if (overwrite) {
      GRADGATE_RETURN_IF_ERROR(
          launch_sign_decode(bits, scale, out.data(), out.size(), true, call->cuda));
    }
    auto tally = call->scratch->finish(call->cuda);
    if (!tally.ok()) return tally.status();
    GRADGATE_RETURN_IF_ERROR(element_frames::check_sign_values(
        frame, bits_float(tally->word[0]), static_cast<uint8_t>(tally->word[1])));
    if (overwrite) return {};
    GRADGATE_RETURN_IF_ERROR(
        launch_sign_decode(bits, scale, out.data(), out.size(), false, call->cuda));
    return call->scratch->finish(call->cuda).status();
  }
};

}  // namespace

Result<std::unique_ptr<Codec>> make_sign_codec(const CodecParams& params) {
  return std::unique_ptr<Codec>(std::make_unique<SignCodec>(params));
}

}  // namespace gradgate::kernels::cuda
