// powersgd on the GPU: the protocol, frames and rules of the CPU codec
// (kernels/cpu/powersgd_codec.cc), with the work on the device. Each round builds M = grad +
// residual once, zero-padded, in scratch memory; the GEMM of the round (P = M Q, or Q_w = M^T
// P_hat) is a cuBLAS call that writes the payload in place, and one tiled kernel adds the shape
// prefix and the checksum. Round 1 then updates the residual, E = M - P_hat Q_w^T, in one kernel
// that skips itself when the round failed, so a round waits for the device once. absorb
// orthonormalises the summed P (one thread block) or rescales the summed Q (one block a column).
//
// The GEMMs sum in another order than the CPU codec, so values agree with it to float rounding,
// not bit for bit; every GPU worker computes the same P_hat from the same sum.
#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "codecs.h"
#include "cuda_check.h"
#include "cuda_codec.h"
#include "powersgd_blas.h"
#include "powersgd_launch.h"
#include "powersgd_layout.h"
#include "powersgd_math.h"

namespace gradgate::kernels::cuda {
namespace {

using powersgd::kShapeBytes;
using powersgd::Shape;

/// The factors of one stream, in device memory.
struct PowersgdState final : DeviceCodecState {
  PowersgdState(const Shape& s, DevicePtr<float> right, DevicePtr<float> left)
      : shape(s), q(std::move(right)), p_hat(std::move(left)) {}

  size_t memory_bytes() const override {
    return (shape.rows + shape.cols) * shape.rank * sizeof(float);
  }

  Shape shape;
  DevicePtr<float> q;      // cols x rank: the right basis, warm-started from the last step
  DevicePtr<float> p_hat;  // rows x rank: the orthonormalised sum of this step's P
  uint64_t key = 0;        // Philox key of the basis, once q_seeded
  bool q_seeded = false;
  bool p_hat_valid = false;  // P_hat belongs to step p_hat_step
  uint64_t p_hat_step = 0;
};

/// A checked payload in device memory.
struct Payload {
  Shape shape;
  const float* values;  // dim x rank
};

PowersgdState* state_of(const Stream* stream) {
  const auto* device = dynamic_cast<const DeviceStream*>(stream);
  return device ? dynamic_cast<PowersgdState*>(device->codec_state()) : nullptr;
}

class PowersgdCodec final : public CudaCodec {
 public:
  using CudaCodec::CudaCodec;

  int rounds() const override { return 2; }

  Result<std::unique_ptr<Stream>> make_stream(const TensorDesc& desc) const override {
    GRADGATE_RETURN_IF_ERROR(check_tensor(desc));
    auto shape = powersgd::matrix_shape(desc, params().rank);
    if (!shape.ok()) return shape.status();
    auto stream = DeviceStream::make(desc, keeps_residual());
    if (!stream.ok()) return stream.status();
    auto q = device_alloc<float>(shape->cols * shape->rank);
    if (!q.ok()) return q.status();
    auto p_hat = device_alloc<float>(shape->rows * shape->rank);
    if (!p_hat.ok()) return p_hat.status();
    (*stream)->set_codec_state(
        std::make_unique<PowersgdState>(*shape, std::move(q).value(), std::move(p_hat).value()));
    return std::unique_ptr<Stream>(std::move(stream).value());
  }

  size_t max_frame_bytes(const TensorDesc& desc) const override {
    auto shape = powersgd::matrix_shape(desc, params().rank);
    if (shape.ok()) return powersgd::max_frame_bytes(*shape);
    Shape one_d = powersgd::one_d_shape(desc.elements);
    one_d.rank = powersgd::rank_for(one_d, params().rank);
    return powersgd::max_frame_bytes(one_d);
  }

  Result<size_t> encode(int round, const StepContext& ctx, std::span<const float> grad,
                        Stream& stream, std::span<std::byte> out) const override {
    PowersgdState* st = state_of(&stream);
    if (st == nullptr) return not_ours();
    const Shape& s = st->shape;
    const uint64_t dim = round == 0 ? s.rows : s.cols;
    const size_t bytes = kFrameHeaderBytes + powersgd::payload_bytes(dim, s.rank);
    auto call = begin_encode(round, ctx, grad, stream, out, bytes, 0, rank32(s));
    if (!call.ok()) return call.status();
    const uint64_t n = grad.size();
    if (round == 1 && !holds_p_hat(*st, ctx.step)) {
      GRADGATE_RETURN_IF_ERROR(launch_count_nonfinite(grad.data(), n, call->tally(), call->cuda));
      auto tally = call->scratch->finish(call->cuda);
      if (!tally.ok()) return tally.status();
      if (tally->count[0] != 0) return nonfinite_gradient(stream, tally->count[0]);
      return needs_p_hat(ctx.step);
    }
    auto area = call->scratch->area(s.rows * s.cols * sizeof(float));
    if (!area.ok()) return area.status();
    auto* m = static_cast<float*>(*area);
    float* values = frame_at<float>(out, kFrameHeaderBytes + kShapeBytes);
    const uint64_t key = powersgd::basis_key(ctx.job_seed, stream.desc().tensor_id);
    if (round == 0 && !st->q_seeded) {
      GRADGATE_RETURN_IF_ERROR(launch_powersgd_normalise_q(st->q.get(), s.cols, rank32(s), key,
                                                           /*redraw=*/true, call->cuda));
    }
    GRADGATE_RETURN_IF_ERROR(launch_powersgd_matrix(grad.data(), call->residual, m, n,
                                                    s.rows * s.cols, call->tally(), call->cuda));
    if (round == 0) {
      GRADGATE_RETURN_IF_ERROR(
          powersgd::multiply_q(m, st->q.get(), values, s.rows, s.cols, rank32(s), call->cuda));
    } else {
      GRADGATE_RETURN_IF_ERROR(powersgd::multiply_p_transposed(m, st->p_hat.get(), values, s.rows,
                                                               s.cols, rank32(s), call->cuda));
    }
    GRADGATE_RETURN_IF_ERROR(launch_seal_header(out.data(), call->header, {}, call->cuda));
    GRADGATE_RETURN_IF_ERROR(
        launch_powersgd_payload(values, nullptr, frame_at<uint32_t>(out, kFrameHeaderBytes),
                                static_cast<uint32_t>(s.rows), static_cast<uint32_t>(s.cols),
                                dim * s.rank, call->sink, &call->tally()->count[1], call->cuda));
    const bool update_residual = round == 1 && call->residual != nullptr;
    if (update_residual) {  // E = M - P_hat Q_w^T, skipped by the kernel if the tally holds errors
      GRADGATE_RETURN_IF_ERROR(launch_powersgd_low_rank(
          st->p_hat.get(), values, s.rows, s.cols, rank32(s), m, call->residual, n,
          /*subtract=*/true, call->tally(), call->cuda));
    }
    auto tally = call->scratch->finish(call->cuda);
    if (!tally.ok()) return tally.status();
    if (tally->count[0] != 0) return nonfinite_gradient(stream, tally->count[0]);
    if (round == 0 && !st->q_seeded) {
      st->key = key;
      st->q_seeded = true;
    }
    if (tally->count[1] != 0) {
      return overflow("gradient of tensor " + std::to_string(stream.desc().tensor_id) +
                      " overflows the float range in the low-rank product; nothing was encoded");
    }
    if (round == 0) st->p_hat_valid = false;  // a new step begins: the old P_hat no longer applies
    call->stream->set_last_encode_passes(update_residual ? 3 : 2);
    return bytes;
  }

  Status absorb(int round, const FrameView& summed, Stream& stream) const override {
    PowersgdState* st = state_of(&stream);
    if (st == nullptr) return not_ours();
    GRADGATE_RETURN_IF_ERROR(check_absorb(round, summed));
    auto payload = parse_payload(summed);
    if (!payload.ok()) return payload.status();
    GRADGATE_RETURN_IF_ERROR(powersgd::check_stream_matches(spec(), summed, payload->shape,
                                                            stream.desc().elements, st->shape));
    const Shape& s = st->shape;
    if (round == 1 && (!st->q_seeded || !holds_p_hat(*st, summed.header.step))) {
      return needs_p_hat(summed.header.step);
    }
    auto call = begin_call();
    if (!call.ok()) return call.status();
    if (round == 0) {
      auto w = call->scratch->area(s.rows * s.rank * sizeof(double));
      if (!w.ok()) return w.status();
      GRADGATE_RETURN_IF_ERROR(launch_powersgd_orthonormalise(payload->values, s.rows, rank32(s),
                                                              static_cast<double*>(*w),
                                                              st->p_hat.get(), call->cuda));
    } else {
      GRADGATE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(st->q.get(), payload->values,
                                                    s.cols * s.rank * sizeof(float),
                                                    cudaMemcpyDeviceToDevice, call->cuda));
      GRADGATE_RETURN_IF_ERROR(launch_powersgd_normalise_q(
          st->q.get(), s.cols, rank32(s), powersgd::redraw_key(st->key, summed.header.step),
          /*redraw=*/false, call->cuda));
    }
    GRADGATE_RETURN_IF_ERROR(call->scratch->finish(call->cuda).status());
    if (round == 0) {
      st->p_hat_valid = true;
      st->p_hat_step = summed.header.step;
    }
    return {};
  }

  Result<size_t> add_frames(const FrameView& a, const FrameView& b,
                            std::span<std::byte> out) const override {
    std::vector<Payload> payloads;  // a's, then b's
    auto call = begin_add(a, b, out, 0, [&](const FrameView& frame) -> Status {
      if (a.header.param != b.header.param) {
        return Status(ErrorCode::kIncompatible, spec() + ": frames differ in rank");
      }
      auto payload = parse_payload(frame);
      if (!payload.ok()) return payload.status();
      payloads.push_back(*payload);
      return {};
    });
    if (!call.ok()) return call.status();
    const Shape& s = payloads[0].shape;
    if (s.rows != payloads[1].shape.rows || s.cols != payloads[1].shape.cols) {
      return Status(ErrorCode::kIncompatible, spec() + ": frames differ in matrix shape");
    }
    const uint64_t dim = a.header.round == 0 ? s.rows : s.cols;
    GRADGATE_RETURN_IF_ERROR(launch_seal_header(out.data(), a.header, {}, call->cuda));
    GRADGATE_RETURN_IF_ERROR(launch_powersgd_payload(
        payloads[0].values, payloads[1].values, frame_at<uint32_t>(out, kFrameHeaderBytes),
        static_cast<uint32_t>(s.rows), static_cast<uint32_t>(s.cols), dim * s.rank, call->sink,
        &call->tally()->count[2], call->cuda));
    auto tally = call->scratch->finish(call->cuda);
    if (!tally.ok()) return tally.status();
    if (tally->count[2] != 0) {
      return sum_overflow("float");
    }
    return call->bytes;
  }

 private:
  static uint32_t rank32(const Shape& s) { return static_cast<uint32_t>(s.rank); }

  static bool holds_p_hat(const PowersgdState& st, uint64_t step) {
    return st.p_hat_valid && st.p_hat_step == step;
  }

  Status not_ours() const {
    return Status(ErrorCode::kInvalidArgument, spec() + ": the stream was not made by powersgd");
  }

  Status needs_p_hat(uint64_t step) const {
    return Status(ErrorCode::kInvalidArgument,
                  spec() + ": round 1 of step " + std::to_string(step) +
                      " needs P_hat of the same step: absorb round 0 first");
  }

  /// The CPU codec's payload checks, on a device payload: the header first, then the shape
  /// prefix and the count of bad values, read back from the device together.
  Result<Payload> parse_payload(const FrameView& frame) const {
    GRADGATE_RETURN_IF_ERROR(powersgd::check_header(frame));
    GRADGATE_RETURN_IF_ERROR(check_aligned(frame));
    auto call = begin_call();
    if (!call.ok()) return call.status();
    const auto* words = payload_at<uint32_t>(frame);
    const float* values = payload_at<float>(frame, kShapeBytes);
    const uint64_t count = (frame.payload.size() - kShapeBytes) / sizeof(float);
    GRADGATE_RETURN_IF_ERROR(call->scratch->copy_word(0, words, sizeof(uint32_t), call->cuda));
    GRADGATE_RETURN_IF_ERROR(call->scratch->copy_word(1, words + 1, sizeof(uint32_t), call->cuda));
    if (count != 0) {
      GRADGATE_RETURN_IF_ERROR(launch_count_nonfinite(values, count, call->tally(), call->cuda));
    }
    auto tally = call->scratch->finish(call->cuda);
    if (!tally.ok()) return tally.status();
    auto shape = powersgd::check_shape(frame, tally->word[0], tally->word[1], tally->count[0]);
    if (!shape.ok()) return shape.status();
    return Payload{*shape, values};
  }

  // decode (overwrite: out = P_hat Q^T) or decode_accumulate (out += P_hat Q^T); every check
  // comes before `out` is written.
  Status decode_into(const FrameView& frame, const Stream* stream, std::span<float> out,
                     bool overwrite) const override {
    GRADGATE_RETURN_IF_ERROR(check_decode(frame, out));
    if (frame.header.round != 1) {
      return Status(ErrorCode::kInvalidArgument,
                    spec() + ": a round-0 frame cannot be decoded: decode the last round's frame");
    }
    auto payload = parse_payload(frame);
    if (!payload.ok()) return payload.status();
    const PowersgdState* st = state_of(stream);
    if (st == nullptr) {
      return Status(ErrorCode::kInvalidArgument,
                    spec() + ": decoding needs the stream (with its P_hat) made by powersgd");
    }
    GRADGATE_RETURN_IF_ERROR(powersgd::check_stream_matches(spec(), frame, payload->shape,
                                                            stream->desc().elements, st->shape));
    if (!holds_p_hat(*st, frame.header.step)) {
      return Status(ErrorCode::kInvalidArgument, spec() + ": the stream holds no P_hat for step " +
                                                     std::to_string(frame.header.step) +
                                                     ": absorb round 0 first");
    }
    auto call = begin_call();
    if (!call.ok()) return call.status();
    const Shape& s = st->shape;
    GRADGATE_RETURN_IF_ERROR(
        launch_powersgd_low_rank(st->p_hat.get(), payload->values, s.rows, s.cols, rank32(s),
                                 overwrite ? nullptr : out.data(), out.data(), out.size(),
                                 /*subtract=*/false, nullptr, call->cuda));
    return call->scratch->finish(call->cuda).status();
  }
};

}  // namespace

Result<std::unique_ptr<Codec>> make_powersgd_codec(const CodecParams& params) {
  return std::unique_ptr<Codec>(std::make_unique<PowersgdCodec>(params));
}

}  // namespace gradgate::kernels::cuda
