// qsgd: max-norm stochastic quantisation (Alistarh et al. 2017) against a scale agreed by all
// workers, summable by plain integer addition (vineeths96, "Gradient-Compression").
//
// Each element v becomes sign(v) * l with l = floor(|v| * s / scale + u), s = 2^bits - 1 levels and
// u uniform from Philox4x32-7 keyed by (job seed, worker) and counted by (element, tensor, step):
// unbiased, reproducible, independent between workers. The wire integer has bits + 1 (sign) +
// ceil(log2 workers) bits rounded up to 8/16/32, so the sum of `workers` frames never overflows.
//
// Payload: [f32 scale][n integers of 1, 2 or 4 bytes]
// param:   bits (bits 0-7) | headroom bits (8-15) | summands, the frames summed into it (16-31)
#include <cmath>
#include <vector>

#include "codecs.h"
#include "element_frames.h"
#include "gradgate/kernels/element_rules.h"
#include "gradgate/kernels/wire_io.h"
#include "loops.h"

namespace gradgate::kernels::cpu {
namespace {

using element_frames::kScaleBytes;
using element_frames::QsgdLayout;

class QsgdCodec final : public CpuCodec {
 public:
  explicit QsgdCodec(const CodecParams& params)
      : CpuCodec(params), layout_{params.bits, qsgd_headroom_bits(params.max_workers), 1} {}

  uint64_t max_summands() const override { return layout_.max_summands(); }
  bool needs_agreed_scale() const override { return true; }

  float local_scale(std::span<const float> grad, const Stream& stream) const override {
    const auto residual = stream.residual();
    return loops()
        .abs_stats(grad.data(), residual.empty() ? nullptr : residual.data(), grad.size())
        .abs_max;
  }

  size_t max_frame_bytes(const TensorDesc& desc) const override {
    return element_frames::qsgd_frame_bytes(layout_, desc.elements);
  }

  Result<size_t> encode(int round, const StepContext& ctx, std::span<const float> grad,
                        Stream& stream, std::span<std::byte> out) const override {
    const size_t bytes = max_frame_bytes(stream.desc());
    GRADGATE_RETURN_IF_ERROR(check_encode(round, ctx, grad, stream, out, bytes));
    const float scale = ctx.agreed_scale > 0.0f ? ctx.agreed_scale : local_scale(grad, stream);
    if (!std::isfinite(scale)) return nonfinite_gradient(stream, 1);
    std::byte* payload = out.data() + kFrameHeaderBytes;
    wire::store<float>(payload, scale);
    void* ints = payload + kScaleBytes;
    float* residual = stream.residual().empty() ? nullptr : stream.residual().data();
    const rules::QsgdKey key =
        rules::qsgd_key(ctx.job_seed, ctx.worker, stream.desc().tensor_id, ctx.step);
    const size_t n = grad.size();
    const int levels = layout_.levels();
    size_t bad = 0;
    switch (layout_.width()) {
      case 1:
        bad = loops().quantize_i8(grad.data(), residual, static_cast<int8_t*>(ints), n, scale,
                                  levels, key);
        break;
      case 2:
        bad = loops().quantize_i16(grad.data(), residual, static_cast<int16_t*>(ints), n, scale,
                                   levels, key);
        break;
      default:
        bad = loops().quantize_i32(grad.data(), residual, static_cast<int32_t*>(ints), n, scale,
                                   levels, key);
        break;
    }
    if (bad != 0) {
      if (residual) {
        std::vector<float> decoded(n, 0.0f);
        dequantize_add(layout_, ints, scale, decoded);
        restore_residual(grad, decoded, stream.residual());
      }
      return nonfinite_gradient(stream, bad);
    }
    return seal(round, ctx, stream, bytes, out, 0, layout_.param());
  }

  Status decode_accumulate(const FrameView& frame, const Stream*,
                           std::span<float> acc) const override {
    GRADGATE_RETURN_IF_ERROR(check_decode(frame, acc));
    auto checked = check_payload(frame);
    if (!checked.ok()) return checked.status();
    if (!element_frames::qsgd_decodes_finite(checked->layout, scale_of(frame),
                                             checked->max_abs_level)) {
      return sum_overflow("float");
    }
    dequantize_add(checked->layout, frame.payload.data() + kScaleBytes, scale_of(frame), acc);
    return {};
  }

  Result<size_t> add_frames(const FrameView& a, const FrameView& b,
                            std::span<std::byte> out) const override {
    const size_t bytes = kFrameHeaderBytes + a.payload.size();
    GRADGATE_RETURN_IF_ERROR(check_add(a, b, out, bytes));
    auto ca = check_payload(a);
    if (!ca.ok()) return ca.status();
    auto cb = check_payload(b);
    if (!cb.ok()) return cb.status();
    auto summed =
        element_frames::qsgd_sum_layout(spec(), ca->layout, cb->layout, scale_of(a), scale_of(b));
    if (!summed.ok()) return summed.status();
    const QsgdLayout& sum = *summed;
    FrameHeader h = a.header;
    h.param = sum.param();
    std::byte* payload = out.data() + kFrameHeaderBytes;
    wire::store<float>(payload, scale_of(a));
    const std::byte* pa = a.payload.data() + kScaleBytes;
    const std::byte* pb = b.payload.data() + kScaleBytes;
    const size_t n = a.header.element_count;
    switch (sum.width()) {
      case 1:
        loops().sum_i8(reinterpret_cast<const int8_t*>(pa), reinterpret_cast<const int8_t*>(pb),
                       reinterpret_cast<int8_t*>(payload + kScaleBytes), n);
        break;
      case 2:
        loops().sum_i16(reinterpret_cast<const int16_t*>(pa), reinterpret_cast<const int16_t*>(pb),
                        reinterpret_cast<int16_t*>(payload + kScaleBytes), n);
        break;
      default:
        loops().sum_i32(reinterpret_cast<const int32_t*>(pa), reinterpret_cast<const int32_t*>(pb),
                        reinterpret_cast<int32_t*>(payload + kScaleBytes), n);
        break;
    }
    seal_frame(h, out);
    return bytes;
  }

 private:
  static float scale_of(const FrameView& frame) { return wire::load<float>(frame.payload.data()); }

  static void dequantize_add(const QsgdLayout& layout, const void* ints, float scale,
                             std::span<float> acc) {
    const float step = scale / static_cast<float>(layout.levels());
    switch (layout.width()) {
      case 1:
        loops().dequantize_add_i8(static_cast<const int8_t*>(ints), step, acc.data(), acc.size());
        break;
      case 2:
        loops().dequantize_add_i16(static_cast<const int16_t*>(ints), step, acc.data(), acc.size());
        break;
      default:
        loops().dequantize_add_i32(static_cast<const int32_t*>(ints), step, acc.data(), acc.size());
        break;
    }
  }

  static uint32_t max_abs(const QsgdLayout& layout, const void* ints, size_t n) {
    switch (layout.width()) {
      case 1:
        return loops().max_abs_i8(static_cast<const int8_t*>(ints), n);
      case 2:
        return loops().max_abs_i16(static_cast<const int16_t*>(ints), n);
      default:
        return loops().max_abs_i32(static_cast<const int32_t*>(ints), n);
    }
  }

  // A frame that passed check_payload: its layout and its largest |level|.
  struct CheckedFrame {
    QsgdLayout layout;
    uint32_t max_abs_level;
  };

  static Result<CheckedFrame> check_payload(const FrameView& frame) {
    auto layout = element_frames::check_qsgd(frame);
    if (!layout.ok()) return layout.status();
    const uint32_t max_level =
        max_abs(*layout, frame.payload.data() + kScaleBytes, frame.header.element_count);
    GRADGATE_RETURN_IF_ERROR(
        element_frames::check_qsgd_values(frame, *layout, scale_of(frame), max_level));
    return CheckedFrame{*layout, max_level};
  }

  QsgdLayout layout_;
};

}  // namespace

Result<std::unique_ptr<Codec>> make_qsgd_codec(const CodecParams& params) {
  return std::unique_ptr<Codec>(std::make_unique<QsgdCodec>(params));
}

}  // namespace gradgate::kernels::cpu
