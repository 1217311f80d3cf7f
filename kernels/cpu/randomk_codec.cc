// randomk: k elements chosen by a seed that all workers share, so every worker picks the same
// indices: frames are summable and carry no indices (vineeths96, "Gradient-Compression").
//
// Selection is stratified: the tensor is cut into k equal strata [floor(j n / k), floor((j+1) n /
// k)) and stratum j contributes one element at a Philox-uniform offset. Exactly k, sorted, O(k) to
// regenerate, and every element is equally likely over steps.
//
// Payload: [u64 selection key][k fp32 values]; k = (payload_bytes - 8) / 4.
#include <algorithm>
#include <cmath>

#include "codecs.h"
#include "gradgate/kernels/philox.h"
#include "gradgate/kernels/wire_io.h"
#include "loops.h"
#include "topk_select.h"

namespace gradgate::kernels::cpu {
namespace {

constexpr size_t kKeyBytes = 8;

// Element chosen in stratum j of k over n elements, for a selection key.
uint32_t stratum_index(uint64_t j, uint64_t k, uint64_t n, uint64_t key) {
  const uint64_t begin = j * n / k;
  const uint64_t length = (j + 1) * n / k - begin;
  const Philox4 bits =
      philox4x32({{static_cast<uint32_t>(j), static_cast<uint32_t>(j >> 32), 0x7A4Bu, 0}},
                 static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32));
  return static_cast<uint32_t>(begin + ((static_cast<uint64_t>(bits.v[0]) * length) >> 32));
}

class RandomkCodec final : public CpuCodec {
 public:
  using CpuCodec::CpuCodec;

  size_t max_frame_bytes(const TensorDesc& desc) const override {
    return kFrameHeaderBytes + kKeyBytes +
           topk_count(params().density, desc.elements) * sizeof(float);
  }

  Result<size_t> encode(int round, const StepContext& ctx, std::span<const float> grad,
                        Stream& stream, std::span<std::byte> out) const override {
    const size_t bytes = max_frame_bytes(stream.desc());
    GRADGATE_RETURN_IF_ERROR(check_encode(round, ctx, grad, stream, out, bytes));
    const auto residual = stream.residual();
    const size_t n = grad.size();
    if (!residual.empty()) {
      const AbsStats stats = loops().accumulate(grad.data(), residual.data(), n);
      if (stats.nonfinite != 0) {
        restore_residual(grad, {}, residual);
        return nonfinite_gradient(stream, stats.nonfinite);
      }
    } else if (const size_t bad = loops().count_nonfinite(grad.data(), n); bad != 0) {
      return nonfinite_gradient(stream, bad);
    }
    const uint64_t key = mix64(
        ctx.job_seed ^ mix64(static_cast<uint64_t>(stream.desc().tensor_id) << 32 ^ ctx.step));
    const size_t k = topk_count(params().density, n);
    std::byte* payload = out.data() + kFrameHeaderBytes;
    wire::store<uint64_t>(payload, key);
    auto* values = payload + kKeyBytes;
    for (size_t j = 0; j < k; ++j) {
      const uint32_t i = stratum_index(j, k, n, key);
      if (residual.empty()) {
        wire::store<float>(values + 4 * j, grad[i]);
      } else {
        wire::store<float>(values + 4 * j, residual[i]);
        residual[i] = 0.0f;
      }
    }
    return seal(round, ctx, stream, bytes, out);
  }

  Status decode_accumulate(const FrameView& frame, const Stream*,
                           std::span<float> acc) const override {
    GRADGATE_RETURN_IF_ERROR(check_decode(frame, acc));
    GRADGATE_RETURN_IF_ERROR(check_payload(frame));
    const uint64_t n = frame.header.element_count;
    const uint64_t k = (frame.payload.size() - kKeyBytes) / 4;
    const uint64_t key = wire::load<uint64_t>(frame.payload.data());
    const std::byte* values = frame.payload.data() + kKeyBytes;
    for (uint64_t j = 0; j < k; ++j)
      acc[stratum_index(j, k, n, key)] += wire::load<float>(values + 4 * j);
    return {};
  }

  Result<size_t> add_frames(const FrameView& a, const FrameView& b,
                            std::span<std::byte> out) const override {
    const size_t bytes = kFrameHeaderBytes + a.payload.size();
    GRADGATE_RETURN_IF_ERROR(check_add(a, b, out, bytes));
    GRADGATE_RETURN_IF_ERROR(check_payload(a));
    GRADGATE_RETURN_IF_ERROR(check_payload(b));
    if (wire::load<uint64_t>(a.payload.data()) != wire::load<uint64_t>(b.payload.data())) {
      return Status(ErrorCode::kIncompatible,
                    spec() + ": frames were selected with different keys");
    }
    std::byte* payload = out.data() + kFrameHeaderBytes;
    std::copy_n(a.payload.data(), kKeyBytes, payload);
    // Payloads start 8-byte aligned in a frame buffer, so the values after the key are aligned.
    const size_t overflowed = loops().sum_checked(
        reinterpret_cast<const float*>(a.payload.data() + kKeyBytes),
        reinterpret_cast<const float*>(b.payload.data() + kKeyBytes),
        reinterpret_cast<float*>(payload + kKeyBytes), (a.payload.size() - kKeyBytes) / 4);
    if (overflowed != 0) return sum_overflow("float");
    seal_frame(a.header, out);
    return bytes;
  }

 private:
  static Status check_payload(const FrameView& frame) {
    if (frame.header.flags != 0 || frame.header.param != 0) {
      return malformed(frame, "unknown flags or param");
    }
    const size_t size = frame.payload.size();
    if (size < kKeyBytes + 4 || (size - kKeyBytes) % 4 != 0) {
      return malformed(frame, "payload is not a key and whole fp32 values");
    }
    if ((size - kKeyBytes) / 4 > frame.header.element_count) {
      return malformed(frame, "more values than the tensor has elements");
    }
    const std::byte* values = frame.payload.data() + kKeyBytes;
    for (size_t j = 0; j < (size - kKeyBytes) / 4; ++j) {
      if (!std::isfinite(wire::load<float>(values + 4 * j))) {
        return malformed(frame, "NaN or infinite value");
      }
    }
    return {};
  }
};

}  // namespace

Result<std::unique_ptr<Codec>> make_randomk_codec(const CodecParams& params) {
  return std::unique_ptr<Codec>(std::make_unique<RandomkCodec>(params));
}

}  // namespace gradgate::kernels::cpu
