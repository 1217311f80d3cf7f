// topk on the GPU: the selection of topk_selection.h, then the payload of
// kernels/cpu/topk_codec.cc written on the device ([u32 count][u32 index_bytes][indices][values],
// indices as gap varints or a bitmap, whichever is smaller; values fp32 or fp16) and checksummed.
// Exact selection gives the CPU codec's frames byte for byte. Decoding checks the whole payload
// on the device, then scatters it. Not summable. The overlap-seeking selection (overlap > 0) has
// no CUDA implementation: make_topk_codec refuses it.
#include <cstring>
#include <string>

#include "codecs.h"
#include "cuda_check.h"
#include "cuda_codec.h"
#include "sparse_launch.h"
#include "topk_selection.h"

namespace gradgate::kernels::cuda {
namespace {

constexpr uint8_t kFlagBitmap = 1;
constexpr uint8_t kFlagFp16 = 2;
constexpr size_t kPrefixBytes = 8;
constexpr size_t kMaxVarintBytes = 5;
constexpr size_t kAlign = 256;

size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

class TopkCodec final : public CudaCodec {
 public:
  using CudaCodec::CudaCodec;

  size_t max_frame_bytes(const TensorDesc& desc) const override {
    const size_t n = desc.elements;
    const size_t k = max_count(n);
    const size_t index_bytes = std::min((n + 7) / 8, kMaxVarintBytes * k);
    return kFrameHeaderBytes + kPrefixBytes + index_bytes + k * value_bytes();
  }

  Result<size_t> encode(int round, const StepContext& ctx, std::span<const float> grad,
                        Stream& stream, std::span<std::byte> out) const override {
    auto call = begin_encode(round, ctx, grad, stream, out, max_frame_bytes(stream.desc()), 0);
    if (!call.ok()) return call.status();
    const size_t n = grad.size();
    auto state = state_of(*call->stream);
    if (!state.ok()) return state.status();
    const SelectionInput input = selection_input(params(), grad.data(), call->residual, n);
    auto selection = select_topk_on_device(input, **state, *call->scratch, call->cuda);
    if (!selection.ok()) return selection.status();
    call->stream->set_last_encode_passes(selection->passes);
    if (selection->nonfinite != 0) {  // the CPU codec's message
      return Status(ErrorCode::kNonFiniteGradient,
                    "gradient has " + std::to_string(selection->nonfinite) +
                        " NaN or infinite values; nothing was encoded");
    }
    auto written = write_frame(*call, ctx, round, *selection, **state, out);
    if (!written.ok() && selection->residual_cleared) {  // nothing sent: the values go back into e
      const PairSource selected{selection->index, selection->value, selection->count};
      if (launch_topk_put(selected, call->residual, call->cuda).ok()) {
        (void)call->scratch->finish(call->cuda);
      }
    }
    return written;
  }

 private:
  bool fp16() const { return params().values == ValueType::kFp16; }
  size_t value_bytes() const { return fp16() ? 2 : 4; }
  size_t max_count(size_t n) const { return selection_input(params(), nullptr, nullptr, n).k_max; }

  // The stream's selection state, made on its first encode.
  Result<TopkDeviceState*> state_of(DeviceStream& stream) const {
    if (auto* state = dynamic_cast<TopkDeviceState*>(stream.codec_state())) return state;
    const SelectionInput sizes =
        selection_input(params(), nullptr, nullptr, stream.desc().elements);
    auto made =
        TopkDeviceState::make(sizes.n, topk::candidate_capacity(sizes.n, sizes.k), sizes.k_max);
    if (!made.ok()) return made.status();
    TopkDeviceState* state = made->get();
    stream.set_codec_state(std::move(made).value());
    return state;
  }

  // The payload of the selection, its header and checksum; clears the sent values in e (fp32: to 0,
  // unless the selection already has; fp16: to their rounding error).
  Result<size_t> write_frame(const Encode& call, const StepContext& ctx, int round,
                             const DeviceSelection& selection, TopkDeviceState& state,
                             std::span<std::byte> out) const {
    const uint64_t n = call.header.element_count;
    const uint64_t count = selection.count;
    GRADGATE_RETURN_IF_ERROR(launch_topk_varint_offsets(
        selection.index, count, state.varint_offsets, state.temp, state.temp_bytes, call.cuda));
    uint64_t varint_size = 0;
    GRADGATE_RETURN_IF_ERROR(
        read_device(&varint_size, state.varint_offsets + count, sizeof varint_size, call.cuda));
    const uint64_t bitmap_size = (n + 7) / 8;
    const bool bitmap = bitmap_size < varint_size;
    const uint64_t index_bytes = bitmap ? bitmap_size : varint_size;
    const size_t bytes = kFrameHeaderBytes + kPrefixBytes + index_bytes + count * value_bytes();
    const auto flags = static_cast<uint8_t>((bitmap ? kFlagBitmap : 0) | (fp16() ? kFlagFp16 : 0));
    const FrameHeader header = header_of(round, ctx, *call.stream, bytes, flags);
    auto sink = crc_sink(out, header, 0);
    if (!sink.ok()) return sink.status();
    std::byte* payload = out.data() + kFrameHeaderBytes;
    GRADGATE_RETURN_IF_ERROR(launch_seal_header(out.data(), header, {}, call.cuda));
    const TopkPayloadOut layout{payload, static_cast<uint32_t>(count),
                                static_cast<uint32_t>(index_bytes), bitmap, fp16()};
    float* e = selection.residual_cleared ? nullptr : call.residual;
    GRADGATE_RETURN_IF_ERROR(launch_topk_write(selection.index, selection.value,
                                               state.varint_offsets, layout, e, call.cuda));
    GRADGATE_RETURN_IF_ERROR(launch_body_crc(payload, 0, header.payload_bytes, *sink, call.cuda));
    GRADGATE_RETURN_IF_ERROR(call.scratch->finish(call.cuda).status());
    return bytes;
  }

  // decode (overwrite: out = decoded) or decode_accumulate; the payload is checked first.
  Status decode_into(const FrameView& frame, const Stream*, std::span<float> out,
                     bool overwrite) const override {
    GRADGATE_RETURN_IF_ERROR(check_decode(frame, out));
    const uint64_t n = frame.header.element_count;
    if (frame.header.flags & ~(kFlagBitmap | kFlagFp16)) return malformed(frame, "unknown flags");
    if (frame.header.param != 0) return malformed(frame, "unknown param");
    if (frame.payload.size() < kPrefixBytes) {
      return malformed(frame, "payload shorter than its prefix");
    }
    GRADGATE_RETURN_IF_ERROR(check_aligned(frame));
    auto call = begin_call();
    if (!call.ok()) return call.status();
    uint32_t prefix[2] = {};
    GRADGATE_RETURN_IF_ERROR(read_device(prefix, frame.payload.data(), sizeof prefix, call->cuda));
    const uint64_t count = prefix[0];
    const uint64_t index_bytes = prefix[1];
    const bool bitmap = frame.header.flags & kFlagBitmap;
    const bool half = frame.header.flags & kFlagFp16;
    const uint64_t value_size = half ? 2 : 4;
    if (count > n) return malformed(frame, "more selected elements than the tensor has");
    if (kPrefixBytes + index_bytes + count * value_size != frame.payload.size()) {
      return malformed(frame, "payload length does not match its count and index length");
    }
    if (bitmap && index_bytes != (n + 7) / 8) {
      return malformed(frame, "bitmap length is not ceil(n/8)");
    }

    const TopkIndexIn in{frame.payload.data() + kPrefixBytes, index_bytes, bitmap, count, n};
    auto temp_bytes = topk_decode_temp_bytes(in);
    if (!temp_bytes.ok()) return temp_bytes.status();
    const size_t index_room = aligned(count * sizeof(uint32_t));
    auto area = call->scratch->area(index_room + *temp_bytes);
    if (!area.ok()) return area.status();
    auto* index = static_cast<uint32_t*>(*area);
    const std::byte* values = in.bytes + index_bytes;
    GRADGATE_RETURN_IF_ERROR(launch_topk_decode_indices(in, index,
                                                        static_cast<std::byte*>(*area) + index_room,
                                                        *temp_bytes, call->tally(), call->cuda));
    GRADGATE_RETURN_IF_ERROR(
        launch_count_nonfinite_values(values, count, half, call->tally(), call->cuda));
    auto tally = call->scratch->finish(call->cuda);
    if (!tally.ok()) return tally.status();
    const uint64_t found = tally->word[0];
    if (tally->count[2] != 0) {
      return malformed(frame, bitmap ? "bitmap sets a bit past the last element"
                                     : "truncated index varint or one longer than 5 bytes");
    }
    if (found > count) {
      return malformed(frame,
                       bitmap ? "bitmap sets more bits than count" : "more indices than count");
    }
    if (found < count) return malformed(frame, "fewer indices than count");
    if (tally->count[1] != 0) return malformed(frame, "an index is out of range");
    if (tally->count[0] != 0) return malformed(frame, "NaN or infinite value");

    if (overwrite) {
      GRADGATE_CUDA_RETURN_IF_ERROR(
          cudaMemsetAsync(out.data(), 0, out.size() * sizeof(float), call->cuda));
    }
    GRADGATE_RETURN_IF_ERROR(
        launch_scatter_add(index, values, count, half, out.data(), call->cuda));
    return call->scratch->finish(call->cuda).status();
  }
};

}  // namespace

Result<std::unique_ptr<Codec>> make_topk_codec(const CodecParams& params) {
  // The overlapping top-k (a second, shifted selection) exists on the CPU only.
  if (params.overlap != 0.0) {
    return Status(ErrorCode::kUnsupported,
                  "codec topk has no CUDA implementation yet; encode from host memory");
  }
  return std::unique_ptr<Codec>(std::make_unique<TopkCodec>(params));
}

}  // namespace gradgate::kernels::cuda
