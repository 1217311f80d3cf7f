// none: the gradient as fp32, lossless; the reference every other codec is measured against.
//
// Its frames are the data, so its cost is memory traffic alone: each operation makes one pass,
// writing the payload block by block and checksumming each block while it is still in cache.
#include <algorithm>

#include "codecs.h"
#include "element_frames.h"
#include "gradgate/kernels/crc32c.h"
#include "loops.h"

namespace gradgate::kernels::cpu {
namespace {

// Elements per block of the fused loops: small enough to be checksummed from L1/L2.
constexpr size_t kBlock = 8192;

class NoneCodec final : public CpuCodec {
 public:
  using CpuCodec::CpuCodec;

  size_t max_frame_bytes(const TensorDesc& desc) const override {
    return element_frames::none_frame_bytes(desc.elements);
  }

  Result<size_t> encode(int round, const StepContext& ctx, std::span<const float> grad,
                        Stream& stream, std::span<std::byte> out) const override {
    const size_t bytes = max_frame_bytes(stream.desc());
    GRADGATE_RETURN_IF_ERROR(check_encode(round, ctx, grad, stream, out, bytes));
    const size_t bad =
        write_sealed(header_of(round, ctx, stream, bytes), out,
                     [&](size_t offset, size_t count, float* payload) {
                       return loops().copy_checked(grad.data() + offset, payload, count);
                     });
    if (bad != 0) return nonfinite_gradient(stream, bad);
    return bytes;
  }

  Result<size_t> encode_add(int round, const StepContext& ctx, std::span<const float> grad,
                            Stream& stream, const FrameView& other,
                            std::span<std::byte> out) const override {
    const size_t bytes = max_frame_bytes(stream.desc());
    GRADGATE_RETURN_IF_ERROR(check_encode(round, ctx, grad, stream, out, bytes));
    const FrameHeader header = header_of(round, ctx, stream, bytes);
    GRADGATE_RETURN_IF_ERROR(check_same_stream(header, other.header));
    GRADGATE_RETURN_IF_ERROR(element_frames::check_none(other));
    const float* theirs = values(other);
    const size_t bad = write_sealed(header, out, [&](size_t offset, size_t count, float* payload) {
      return loops().sum_checked(grad.data() + offset, theirs + offset, payload, count);
    });
    if (bad == 0) return bytes;
    if (const size_t own = loops().count_nonfinite(grad.data(), grad.size()); own != 0) {
      return nonfinite_gradient(stream, own);
    }
    GRADGATE_RETURN_IF_ERROR(check_payload(other));
    return sum_overflow("float");
  }

  Status decode(const FrameView& frame, const Stream*, std::span<float> out) const override {
    GRADGATE_RETURN_IF_ERROR(check_decode(frame, out));
    GRADGATE_RETURN_IF_ERROR(element_frames::check_none(frame));
    return element_frames::check_finite_values(
        frame, loops().copy_checked(values(frame), out.data(), out.size()));
  }

  Status decode_accumulate(const FrameView& frame, const Stream*,
                           std::span<float> acc) const override {
    GRADGATE_RETURN_IF_ERROR(check_decode(frame, acc));
    GRADGATE_RETURN_IF_ERROR(check_payload(frame));
    loops().add(values(frame), acc.data(), acc.size());
    return {};
  }

  Result<size_t> add_frames(const FrameView& a, const FrameView& b,
                            std::span<std::byte> out) const override {
    const size_t bytes = kFrameHeaderBytes + a.payload.size();
    GRADGATE_RETURN_IF_ERROR(check_add(a, b, out, bytes));
    GRADGATE_RETURN_IF_ERROR(element_frames::check_none(a));
    GRADGATE_RETURN_IF_ERROR(element_frames::check_none(b));
    const size_t bad =
        write_sealed(a.header, out, [&](size_t offset, size_t count, float* payload) {
          return loops().sum_checked(values(a) + offset, values(b) + offset, payload, count);
        });
    if (bad == 0) return bytes;
    GRADGATE_RETURN_IF_ERROR(check_payload(a));
    GRADGATE_RETURN_IF_ERROR(check_payload(b));
    return sum_overflow("float");
  }

 private:
  static const float* values(const FrameView& frame) {
    return reinterpret_cast<const float*>(frame.payload.data());
  }

  // Writes `header` and the payload that `fill(offset, count, payload + offset)` makes block by
  // block into `out`, with its checksum; returns the sum of what `fill` returned (bad values).
  template <typename Fill>
  static size_t write_sealed(const FrameHeader& header, std::span<std::byte> out, Fill fill) {
    uint32_t crc = write_frame_header(header, out);
    auto* payload = reinterpret_cast<float*>(out.data() + kFrameHeaderBytes);
    const size_t elements = header.element_count;
    size_t bad = 0;
    for (size_t offset = 0; offset < elements; offset += kBlock) {
      const size_t count = std::min(kBlock, elements - offset);
      bad += fill(offset, count, payload + offset);
      crc = crc32c_extend(crc, std::as_bytes(std::span(payload + offset, count)));
    }
    store_frame_crc(crc, out);
    return bad;
  }

  static Status check_payload(const FrameView& frame) {
    GRADGATE_RETURN_IF_ERROR(element_frames::check_none(frame));
    return element_frames::check_finite_values(
        frame, loops().count_nonfinite(values(frame), frame.header.element_count));
  }
};

}  // namespace

Result<std::unique_ptr<Codec>> make_none_codec(const CodecParams& params) {
  return std::unique_ptr<Codec>(std::make_unique<NoneCodec>(params));
}

}  // namespace gradgate::kernels::cpu
