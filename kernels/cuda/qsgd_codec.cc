// qsgd on the GPU: the quantisation with error feedback in one pass (the Philox draws included);
// without an agreed scale, a read-only reduction over |grad + residual| finds the local one first.
#include <cmath>
#include <limits>

#include "codecs.h"
#include "cuda_codec.h"
#include "element_frames.h"
#include "gradgate/kernels/element_rules.h"
#include "gradgate/kernels/half.h"

namespace gradgate::kernels::cuda {
namespace {

using element_frames::kScaleBytes;
using element_frames::QsgdLayout;

class QsgdCodec final : public CudaCodec {
 public:
  explicit QsgdCodec(const CodecParams& params)
      : CudaCodec(params), layout_{params.bits, qsgd_headroom_bits(params.max_workers), 1} {}

  uint64_t max_summands() const override { return layout_.max_summands(); }
  bool needs_agreed_scale() const override { return true; }

  /// NaN when the device fails (encode then rejects the scale).
  float local_scale(std::span<const float> grad, const Stream& stream) const override {
    const auto* device = dynamic_cast<const DeviceStream*>(&stream);
    auto call = begin_call();
    if (!device || grad.size() != stream.desc().elements || !call.ok()) {
      return std::numeric_limits<float>::quiet_NaN();
    }
    auto scale = max_magnitude(*call, grad.data(), device->device_residual(), grad.size());
    return scale.ok() ? *scale : std::numeric_limits<float>::quiet_NaN();
  }

  size_t max_frame_bytes(const TensorDesc& desc) const override {
    return element_frames::qsgd_frame_bytes(layout_, desc.elements);
  }

  Result<size_t> encode(int round, const StepContext& ctx, std::span<const float> grad,
                        Stream& stream, std::span<std::byte> out) const override {
    const size_t bytes = max_frame_bytes(stream.desc());
    auto call = begin_encode(round, ctx, grad, stream, out, bytes, kScaleBytes, layout_.param());
    if (!call.ok()) return call.status();
    float scale = ctx.agreed_scale;
    if (!(scale > 0.0f)) {
      auto local = max_magnitude(*call, grad.data(), call->residual, grad.size());
      if (!local.ok()) return local.status();
      scale = *local;
      call->stream->set_last_encode_passes(2);  // the read-only pass for the scale first
      GRADGATE_RETURN_IF_ERROR(call->scratch->begin(call->cuda));
    }
    if (!std::isfinite(scale)) return nonfinite_gradient(stream, 1);
    const rules::QsgdGrid grid = rules::qsgd_grid(scale, layout_.levels());
    const rules::QsgdKey key =
        rules::qsgd_key(ctx.job_seed, ctx.worker, stream.desc().tensor_id, ctx.step);
    void* levels = out.data() + kFrameHeaderBytes + kScaleBytes;
    GRADGATE_RETURN_IF_ERROR(
        launch_seal_header(out.data(), call->header, {kScaleBytes, float_bits(scale)}, call->cuda));
    GRADGATE_RETURN_IF_ERROR(launch_qsgd_encode(layout_.width(), grad.data(), call->residual,
                                                levels, grad.size(), grid, key, call->sink,
                                                call->tally(), call->cuda));
    auto tally = call->scratch->finish(call->cuda);
    if (!tally.ok()) return tally.status();
    if (tally->count[0] == 0) return bytes;
    if (call->residual) {
      GRADGATE_RETURN_IF_ERROR(launch_qsgd_restore(layout_.width(), grad.data(), levels,
                                                   call->residual, grad.size(), grid.to_value,
                                                   call->cuda));
      GRADGATE_RETURN_IF_ERROR(call->scratch->finish(call->cuda).status());
    }
    return nonfinite_gradient(stream, tally->count[0]);
  }

  Result<size_t> add_frames(const FrameView& a, const FrameView& b,
                            std::span<std::byte> out) const override {
    auto call = begin_add(a, b, out, kScaleBytes, [](const FrameView& frame) {
      return element_frames::check_qsgd(frame).status();
    });
    if (!call.ok()) return call.status();
    const QsgdLayout la = QsgdLayout::from_param(a.header.param);
    const QsgdLayout lb = QsgdLayout::from_param(b.header.param);
    FrameHeader header = a.header;
    header.param = QsgdLayout{la.bits, la.headroom, la.summands + lb.summands}.param();
    // Same payload sizes (check_add) and valid layouts: a and b have levels of the same width.
    GRADGATE_RETURN_IF_ERROR(
        launch_seal_header(out.data(), header, {kScaleBytes, 0, a.payload.data()}, call->cuda));
    GRADGATE_RETURN_IF_ERROR(launch_qsgd_sum(
        la.width(), levels_of(a), levels_of(b), out.data() + kFrameHeaderBytes + kScaleBytes,
        a.header.element_count, call->sink, call->tally(), call->cuda));
    GRADGATE_RETURN_IF_ERROR(
        call->scratch->copy_word(0, a.payload.data(), kScaleBytes, call->cuda));
    GRADGATE_RETURN_IF_ERROR(
        call->scratch->copy_word(1, b.payload.data(), kScaleBytes, call->cuda));
    auto tally = call->scratch->finish(call->cuda);
    if (!tally.ok()) return tally.status();
    const float scale_a = bits_float(tally->word[0]), scale_b = bits_float(tally->word[1]);
    GRADGATE_RETURN_IF_ERROR(element_frames::check_qsgd_values(a, la, scale_a, tally->max[0]));
    GRADGATE_RETURN_IF_ERROR(element_frames::check_qsgd_values(b, lb, scale_b, tally->max[1]));
    auto sum = element_frames::qsgd_sum_layout(spec(), la, lb, scale_a, scale_b);
    if (!sum.ok()) return sum.status();
    return call->bytes;
  }

 private:
  static const void* levels_of(const FrameView& frame) {
    return frame.payload.data() + kScaleBytes;
  }

  // The largest kept |g + e| (enqueued on the call's stream, which it waits for).
  static Result<float> max_magnitude(const Call& call, const float* g, const float* e, size_t n) {
    GRADGATE_RETURN_IF_ERROR(call.scratch->begin(call.cuda));
    GRADGATE_RETURN_IF_ERROR(launch_abs_stats(g, e, n, nullptr, call.tally(), call.cuda));
    auto tally = call.scratch->finish(call.cuda);
    if (!tally.ok()) return tally.status();
    return bits_float(tally->max[0]);
  }

  // decode (overwrite: out = decoded, checked after) or decode_accumulate (checked first).
  Status decode_into(const FrameView& frame, const Stream*, std::span<float> out,
                     bool overwrite) const override {
    GRADGATE_RETURN_IF_ERROR(check_decode(frame, out));
    auto layout = element_frames::check_qsgd(frame);
    if (!layout.ok()) return layout.status();
    GRADGATE_RETURN_IF_ERROR(check_aligned(frame));
    auto call = begin_call();
    if (!call.ok()) return call.status();
    const auto* scale = payload_at<float>(frame);
    GRADGATE_RETURN_IF_ERROR(call->scratch->copy_word(0, scale, kScaleBytes, call->cuda));
    if (overwrite) {
      GRADGATE_RETURN_IF_ERROR(launch_qsgd_decode(layout->width(), levels_of(frame), scale,
                                                  layout->levels(), out.data(), out.size(), true,
                                                  call->tally(), call->cuda));
    } else {
      GRADGATE_RETURN_IF_ERROR(launch_qsgd_max_level(layout->width(), levels_of(frame), out.size(),
                                                     0, call->tally(), call->cuda));
    }
    auto tally = call->scratch->finish(call->cuda);
    if (!tally.ok()) return tally.status();
    const float scale_value = bits_float(tally->word[0]);
    GRADGATE_RETURN_IF_ERROR(
        element_frames::check_qsgd_values(frame, *layout, scale_value, tally->max[0]));
    if (!element_frames::qsgd_decodes_finite(*layout, scale_value, tally->max[0])) {
      return sum_overflow("float");
    }
    if (overwrite) return {};
    GRADGATE_RETURN_IF_ERROR(launch_qsgd_decode(layout->width(), levels_of(frame), scale,
                                                layout->levels(), out.data(), out.size(), false,
                                                call->tally(), call->cuda));
    return call->scratch->finish(call->cuda).status();
  }

  QsgdLayout layout_;
};

}  // namespace

Result<std::unique_ptr<Codec>> make_qsgd_codec(const CodecParams& params) {
  return std::unique_ptr<Codec>(std::make_unique<QsgdCodec>(params));
}

}  // namespace gradgate::kernels::cuda
