// randomk on the GPU: one pass adds the gradient into the residual, then one thread per selected
// element gathers it into the payload ([u64 selection key][k fp32 values]) and clears it in the
// residual; the indices come from the key as on the CPU (randomk_strata.h), so frames match the
// CPU codec's byte for byte. Summable: frames of one step share their key and add value by value.
#include <string>

#include "../cpu/topk_select.h"  // topk_count: the CPU codec's k
#include "codecs.h"
#include "cuda_check.h"
#include "cuda_codec.h"
#include "randomk_launch.h"
#include "randomk_strata.h"
#include "sparse_launch.h"

namespace gradgate::kernels::cuda {
namespace {

constexpr size_t kKeyBytes = 8;

class RandomkCodec final : public CudaCodec {
 public:
  using CudaCodec::CudaCodec;

  size_t max_frame_bytes(const TensorDesc& desc) const override {
    return kFrameHeaderBytes + kKeyBytes +
           cpu::topk_count(params().density, desc.elements) * sizeof(float);
  }

  Result<size_t> encode(int round, const StepContext& ctx, std::span<const float> grad,
                        Stream& stream, std::span<std::byte> out) const override {
    const size_t bytes = max_frame_bytes(stream.desc());
    auto call = begin_encode(round, ctx, grad, stream, out, bytes, 0);
    if (!call.ok()) return call.status();
    const size_t n = grad.size();
    float* e = call->residual;
    GRADGATE_RETURN_IF_ERROR(e ? launch_accumulate(grad.data(), e, n, call->tally(), call->cuda)
                               : launch_count_nonfinite(grad.data(), n, call->tally(), call->cuda));
    auto tally = call->scratch->finish(call->cuda);
    if (!tally.ok()) return tally.status();
    if (tally->count[0] != 0) {
      if (e) {
        GRADGATE_RETURN_IF_ERROR(launch_unaccumulate(grad.data(), e, n, call->cuda));
        GRADGATE_RETURN_IF_ERROR(call->scratch->finish(call->cuda).status());
      }
      return nonfinite_gradient(stream, tally->count[0]);
    }
    const RandomkSelection selection{
        n, cpu::topk_count(params().density, n),
        randomk::selection_key(ctx.job_seed, stream.desc().tensor_id, ctx.step)};
    std::byte* payload = out.data() + kFrameHeaderBytes;
    GRADGATE_RETURN_IF_ERROR(launch_seal_header(out.data(), call->header, {}, call->cuda));
    GRADGATE_RETURN_IF_ERROR(launch_randomk_gather(grad.data(), e, selection, payload, call->cuda));
    GRADGATE_RETURN_IF_ERROR(
        launch_body_crc(payload, 0, call->header.payload_bytes, call->sink, call->cuda));
    GRADGATE_RETURN_IF_ERROR(call->scratch->finish(call->cuda).status());
    return bytes;
  }

  Result<size_t> add_frames(const FrameView& a, const FrameView& b,
                            std::span<std::byte> out) const override {
    auto call = begin_add(a, b, out, 0, check_shape);
    if (!call.ok()) return call.status();
    const uint64_t k = values_of(a);
    std::byte* payload = out.data() + kFrameHeaderBytes;
    GRADGATE_RETURN_IF_ERROR(launch_seal_header(out.data(), a.header, {}, call->cuda));
    GRADGATE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(payload, a.payload.data(), kKeyBytes,
                                                  cudaMemcpyDeviceToDevice, call->cuda));
    // The values are the body's last 4k bytes: a sink of 4k bytes places them.
    const CrcSink values_sink{call->sink.slot, k * sizeof(float), call->sink.zeros};
    GRADGATE_RETURN_IF_ERROR(launch_none_write(payload_at<float>(a, kKeyBytes),
                                               payload_at<float>(b, kKeyBytes),
                                               frame_at<float>(out, kFrameHeaderBytes + kKeyBytes),
                                               k, values_sink, call->tally(), call->cuda));
    GRADGATE_RETURN_IF_ERROR(launch_body_crc(payload, 0, kKeyBytes, call->sink, call->cuda));
    auto tally = call->scratch->finish(call->cuda);
    if (!tally.ok()) return tally.status();
    if (tally->count[0] != 0) return malformed(a, "NaN or infinite value");
    if (tally->count[1] != 0) return malformed(b, "NaN or infinite value");
    uint64_t keys[2] = {};
    GRADGATE_RETURN_IF_ERROR(read_device(&keys[0], a.payload.data(), kKeyBytes, call->cuda));
    GRADGATE_RETURN_IF_ERROR(read_device(&keys[1], b.payload.data(), kKeyBytes, call->cuda));
    if (keys[0] != keys[1]) {
      return Status(ErrorCode::kIncompatible,
                    spec() + ": frames were selected with different keys");
    }
    if (tally->count[2] != 0) return sum_overflow("float");
    return call->bytes;
  }

 private:
  static uint64_t values_of(const FrameView& frame) {
    return (frame.payload.size() - kKeyBytes) / sizeof(float);
  }

  // The checks of the CPU codec that the header and the payload size can tell.
  static Status check_shape(const FrameView& frame) {
    if (frame.header.flags != 0 || frame.header.param != 0) {
      return malformed(frame, "unknown flags or param");
    }
    const size_t size = frame.payload.size();
    if (size < kKeyBytes + 4 || (size - kKeyBytes) % 4 != 0) {
      return malformed(frame, "payload is not a key and whole fp32 values");
    }
    if (values_of(frame) > frame.header.element_count) {
      return malformed(frame, "more values than the tensor has elements");
    }
    return {};
  }

  // decode (overwrite: out = decoded) or decode_accumulate; the values are checked first.
  Status decode_into(const FrameView& frame, const Stream*, std::span<float> out,
                     bool overwrite) const override {
    GRADGATE_RETURN_IF_ERROR(check_decode(frame, out));
    GRADGATE_RETURN_IF_ERROR(check_shape(frame));
    GRADGATE_RETURN_IF_ERROR(check_aligned(frame));
    auto call = begin_call();
    if (!call.ok()) return call.status();
    const uint64_t k = values_of(frame);
    const float* values = payload_at<float>(frame, kKeyBytes);
    GRADGATE_RETURN_IF_ERROR(launch_count_nonfinite(values, k, call->tally(), call->cuda));
    auto tally = call->scratch->finish(call->cuda);
    if (!tally.ok()) return tally.status();
    if (tally->count[0] != 0) return malformed(frame, "NaN or infinite value");
    uint64_t key = 0;
    GRADGATE_RETURN_IF_ERROR(read_device(&key, frame.payload.data(), kKeyBytes, call->cuda));
    if (overwrite) {
      GRADGATE_CUDA_RETURN_IF_ERROR(
          cudaMemsetAsync(out.data(), 0, out.size() * sizeof(float), call->cuda));
    }
    GRADGATE_RETURN_IF_ERROR(launch_randomk_scatter_add(
        values, {frame.header.element_count, k, key}, out.data(), call->cuda));
    return call->scratch->finish(call->cuda).status();
  }
};

}  // namespace

Result<std::unique_ptr<Codec>> make_randomk_codec(const CodecParams& params) {
  return std::unique_ptr<Codec>(std::make_unique<RandomkCodec>(params));
}

}  // namespace gradgate::kernels::cuda
