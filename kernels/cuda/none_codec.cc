// none on the GPU: the gradient as fp32, one pass per call (the copy or sum, its checksum and the
// count of bad values together).
#include "codecs.h"
#include "cuda_codec.h"
#include "element_frames.h"

namespace gradgate::kernels::cuda {
namespace {

class NoneCodec final : public CudaCodec {
 public:
  using CudaCodec::CudaCodec;

  size_t max_frame_bytes(const TensorDesc& desc) const override {
    return element_frames::none_frame_bytes(desc.elements);
  }

  Result<size_t> encode(int round, const StepContext& ctx, std::span<const float> grad,
                        Stream& stream, std::span<std::byte> out) const override {
    const size_t bytes = max_frame_bytes(stream.desc());
    auto call = begin_encode(round, ctx, grad, stream, out, bytes, 0);
    if (!call.ok()) return call.status();
    auto tally = write(*call, grad.data(), nullptr, out);
    if (!tally.ok()) return tally.status();
    if (tally->count[0] != 0) return nonfinite_gradient(stream, tally->count[0]);
    return bytes;
  }

  Result<size_t> encode_add(int round, const StepContext& ctx, std::span<const float> grad,
                            Stream& stream, const FrameView& other,
                            std::span<std::byte> out) const override {
    const size_t bytes = max_frame_bytes(stream.desc());
    auto call = begin_encode(round, ctx, grad, stream, out, bytes, 0);
    if (!call.ok()) return call.status();
    GRADGATE_RETURN_IF_ERROR(check_same_stream(call->header, other.header));
    GRADGATE_RETURN_IF_ERROR(element_frames::check_none(other));
    GRADGATE_RETURN_IF_ERROR(check_aligned(other));
    auto tally = write(*call, grad.data(), payload_at<float>(other), out);
    if (!tally.ok()) return tally.status();
    if (tally->count[0] != 0) return nonfinite_gradient(stream, tally->count[0]);
    GRADGATE_RETURN_IF_ERROR(element_frames::check_finite_values(other, tally->count[1]));
    if (tally->count[2] != 0) return sum_overflow("float");
    return bytes;
  }

  Result<size_t> add_frames(const FrameView& a, const FrameView& b,
                            std::span<std::byte> out) const override {
    auto call = begin_add(a, b, out, 0, element_frames::check_none);
    if (!call.ok()) return call.status();
    GRADGATE_RETURN_IF_ERROR(launch_seal_header(out.data(), a.header, {}, call->cuda));
    GRADGATE_RETURN_IF_ERROR(launch_none_write(
        payload_at<float>(a), payload_at<float>(b), frame_at<float>(out, kFrameHeaderBytes),
        a.header.element_count, call->sink, call->tally(), call->cuda));
    auto tally = finish_add(*call, a, b);
    if (!tally.ok()) return tally.status();
    if (tally->count[2] != 0) return sum_overflow("float");
    return call->bytes;
  }

 private:
  // Header, then the fp32 payload a (+ b) with its checksum; returns the tally.
  static Result<Tally> write(const Encode& call, const float* a, const float* b,
                             std::span<std::byte> out) {
    GRADGATE_RETURN_IF_ERROR(launch_seal_header(out.data(), call.header, {}, call.cuda));
    GRADGATE_RETURN_IF_ERROR(launch_none_write(a, b, frame_at<float>(out, kFrameHeaderBytes),
                                               call.header.element_count, call.sink, call.tally(),
                                               call.cuda));
    return call.scratch->finish(call.cuda);
  }

  Status decode_into(const FrameView& frame, const Stream*, std::span<float> out,
                     bool overwrite) const override {
    GRADGATE_RETURN_IF_ERROR(check_decode(frame, out));
    GRADGATE_RETURN_IF_ERROR(element_frames::check_none(frame));
    GRADGATE_RETURN_IF_ERROR(check_aligned(frame));
    const float* values = payload_at<float>(frame);
    return decode_floats(
        frame, overwrite,
        [&](const Call& call) {
          return launch_count_nonfinite(values, out.size(), call.tally(), call.cuda);
        },
        [&](const Call& call, bool replace) {
          return launch_none_decode(values, out.data(), out.size(), replace, call.tally(),
                                    call.cuda);
        });
  }
};

}  // namespace

Result<std::unique_ptr<Codec>> make_none_codec(const CodecParams& params) {
  return std::unique_ptr<Codec>(std::make_unique<NoneCodec>(params));
}

}  // namespace gradgate::kernels::cuda
