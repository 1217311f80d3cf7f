// topk: the largest-magnitude elements (selection in topk_select.h), sent as indices and values.
//
// Payload: [u32 count][u32 index_bytes][index bytes][count values]
//   flags bit 0: indices as a bitmap of ceil(n / 8) bytes (bit i of byte i / 8 set = selected);
//                otherwise as LEB128 varints of the gaps (first index, then index - previous - 1).
//                The encoder writes whichever is smaller.
//   flags bit 1: values as fp16 (round-to-nearest-even); otherwise fp32.
// Not summable: different workers select different indices.
#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

#include "codecs.h"
#include "gradgate/kernels/half.h"
#include "gradgate/kernels/wire_io.h"
#include "loops.h"
#include "topk_select.h"

namespace gradgate::kernels::cpu {
namespace {

constexpr uint8_t kFlagBitmap = 1;
constexpr uint8_t kFlagFp16 = 2;
constexpr size_t kPrefixBytes = 8;
constexpr size_t kMaxVarintBytes = 5;

size_t varint_bytes(uint32_t v) {
  return 1 + (v >= (1u << 7)) + (v >= (1u << 14)) + (v >= (1u << 21)) + (v >= (1u << 28));
}

size_t gap_varint_bytes(std::span<const uint32_t> indices) {
  size_t bytes = 0;
  uint32_t next = 0;  // smallest index the next one may take
  for (uint32_t i : indices) {
    bytes += varint_bytes(i - next);
    next = i + 1;
  }
  return bytes;
}

std::byte* write_gap_varints(std::span<const uint32_t> indices, std::byte* out) {
  uint32_t next = 0;
  for (uint32_t i : indices) {
    uint32_t gap = i - next;
    next = i + 1;
    if (gap < (1u << 14)) {
      // Branch-free 1-or-2-byte form (gaps are short at useful densities). The second byte may
      // land on the next field's first byte, which is written afterwards.
      const bool two = gap >= 0x80;
      out[0] = static_cast<std::byte>((gap & 0x7F) | (two ? 0x80u : 0u));
      out[1] = static_cast<std::byte>(gap >> 7);
      out += 1 + two;
      continue;
    }
    while (gap >= 0x80) {
      *out++ = static_cast<std::byte>(gap | 0x80);
      gap >>= 7;
    }
    *out++ = static_cast<std::byte>(gap);
  }
  return out;
}

void write_bitmap(std::span<const uint32_t> indices, std::byte* out, size_t bytes) {
  std::fill(out, out + bytes, std::byte{0});
  for (uint32_t i : indices) out[i / 8] |= static_cast<std::byte>(1u << (i % 8));
}

struct TopkPayload {
  std::vector<uint32_t> indices;
  const std::byte* values = nullptr;
  bool fp16 = false;
};

// A stream whose residual may be short of the selector's pending fixes between steps.
class TopkStream final : public Stream {
 public:
  using Stream::Stream;
  /// The residual as select_topk works on it (pending fixes not applied).
  std::span<float> deferred_residual() { return stored_residual(); }
  size_t memory_bytes() const override {
    return Stream::memory_bytes() + selector.memory_bytes() +
           (last_support.capacity() + merged_indices.capacity()) * sizeof(uint32_t) +
           merged_values.capacity() * sizeof(float) + picks.capacity() * sizeof(Pick);
  }

  mutable TopkSelectorState selector;  // mutable: sync_residual moves fixes into the residual
  // Overlap-seeking selection: the indices of the last aggregate absorbed (ascending), and the
  // selection with the overlap picks merged in (reused every step).
  std::vector<uint32_t> last_support;
  std::vector<uint32_t> merged_indices;
  std::vector<float> merged_values;
  struct Pick {
    uint32_t index;
    float value;
  };
  std::vector<Pick> picks;  // scratch of the overlap picks

 private:
  void sync_residual() const override { apply_pending(selector, stored_residual()); }
};

class TopkCodec final : public CpuCodec {
 public:
  explicit TopkCodec(const CodecParams& params) : CpuCodec(params) {}

  Result<std::unique_ptr<Stream>> make_stream(const TensorDesc& desc) const override {
    auto base = CpuCodec::make_stream(desc);
    if (!base.ok()) return base.status();
    return std::unique_ptr<Stream>(std::make_unique<TopkStream>(desc, keeps_residual()));
  }

  size_t max_frame_bytes(const TensorDesc& desc) const override {
    const size_t n = desc.elements;
    const size_t k = max_count(n);
    const size_t index_bytes = std::min((n + 7) / 8, kMaxVarintBytes * k);
    return kFrameHeaderBytes + kPrefixBytes + index_bytes + k * value_bytes();
  }

  Result<size_t> encode(int round, const StepContext& ctx, std::span<const float> grad,
                        Stream& stream, std::span<std::byte> out) const override {
    GRADGATE_RETURN_IF_ERROR(
        check_encode(round, ctx, grad, stream, out, max_frame_bytes(stream.desc())));
    auto& topk_stream = static_cast<TopkStream&>(stream);
    const size_t n = grad.size();
    const size_t k = topk_count(params().density, n);
    const size_t reserved = topk_stream.last_support.empty()
                                ? 0
                                : static_cast<size_t>(params().overlap * static_cast<double>(k));
    auto selected = select_topk(grad, topk_stream.deferred_residual(), k - reserved,
                                params().select, topk_stream.selector);
    if (!selected.ok()) return selected.status();
    std::span<const uint32_t> indices = selected->indices;
    std::span<const float> values = selected->values;
    if (reserved > 0) {
      add_overlap_picks(topk_stream, grad, reserved, indices, values);
      indices = topk_stream.merged_indices;
      values = topk_stream.merged_values;
    }

    const size_t varint_size = gap_varint_bytes(indices);
    const size_t bitmap_size = (n + 7) / 8;
    const bool bitmap = bitmap_size < varint_size;
    const size_t index_bytes = bitmap ? bitmap_size : varint_size;
    std::byte* p = out.data() + kFrameHeaderBytes;
    wire::store<uint32_t>(p, static_cast<uint32_t>(indices.size()));
    wire::store<uint32_t>(p + 4, static_cast<uint32_t>(index_bytes));
    p += kPrefixBytes;
    if (bitmap) {
      write_bitmap(indices, p, bitmap_size);
    } else {
      write_gap_varints(indices, p);
    }
    p += index_bytes;
    // With fp16 values the residual keeps the rounding error at the selected indices: that write
    // needs the residual exact, pending fixes applied.
    write_values(indices, values, fp16() ? stream.residual() : std::span<float>{}, p);

    const size_t bytes =
        kFrameHeaderBytes + kPrefixBytes + index_bytes + indices.size() * value_bytes();
    return seal(round, ctx, stream, bytes, out,
                static_cast<uint8_t>((bitmap ? kFlagBitmap : 0) | (fp16() ? kFlagFp16 : 0)));
  }

  Status absorb(int, const FrameView& aggregate, Stream& stream) const override {
    if (params().overlap == 0.0) return {};
    auto payload = parse_payload(aggregate);
    if (!payload.ok()) return payload.status();
    static_cast<TopkStream&>(stream).last_support = std::move(payload->indices);
    return {};
  }

  Status decode_accumulate(const FrameView& frame, const Stream*,
                           std::span<float> acc) const override {
    GRADGATE_RETURN_IF_ERROR(check_decode(frame, acc));
    auto payload = parse_payload(frame);
    if (!payload.ok()) return payload.status();
    const auto& indices = payload->indices;
    for (size_t j = 0; j < indices.size(); ++j) acc[indices[j]] += value_at(*payload, j);
    return {};
  }

 private:
  bool fp16() const { return params().values == ValueType::kFp16; }
  size_t value_bytes() const { return fp16() ? 2 : 4; }
  size_t max_count(size_t n) const {
    const size_t k = topk_count(params().density, n);
    return params().select == TopkSelect::kExact ? k : topk_max_count(k);
  }

  // Merges into the stream's merged_* the `selected` elements and up to `reserved` more: the
  // largest |v| among the last aggregate's indices that are not selected yet (v = g + e, read
  // from the residual, where they are cleared; from g without error feedback).
  void add_overlap_picks(TopkStream& stream, std::span<const float> grad, size_t reserved,
                         std::span<const uint32_t> selected,
                         std::span<const float> selected_values) const {
    const std::span<float> residual = stream.residual();  // exact: pending fixes applied
    const std::span<const float> source = residual.empty() ? grad : residual;
    using Pick = TopkStream::Pick;
    auto& picks = stream.picks;
    picks.clear();
    size_t s = 0;
    for (uint32_t i : stream.last_support) {
      while (s < selected.size() && selected[s] < i) ++s;
      if ((s < selected.size() && selected[s] == i) || i >= source.size() || source[i] == 0.0f) {
        continue;
      }
      picks.push_back({i, source[i]});
    }
    if (picks.size() > reserved) {
      std::nth_element(
          picks.begin(), picks.begin() + static_cast<std::ptrdiff_t>(reserved), picks.end(),
          [](const Pick& a, const Pick& b) { return std::fabs(a.value) > std::fabs(b.value); });
      picks.resize(reserved);
      std::sort(picks.begin(), picks.end(),
                [](const Pick& a, const Pick& b) { return a.index < b.index; });
    }
    for (const Pick& pick : picks) {
      if (!residual.empty()) residual[pick.index] = 0.0f;
    }
    auto& indices = stream.merged_indices;
    auto& values = stream.merged_values;
    indices.clear();
    values.clear();
    size_t p = 0;
    for (size_t j = 0; j <= selected.size(); ++j) {
      const uint32_t next = j < selected.size() ? selected[j] : UINT32_MAX;
      for (; p < picks.size() && picks[p].index < next; ++p) {
        indices.push_back(picks[p].index);
        values.push_back(picks[p].value);
      }
      if (j < selected.size()) {
        indices.push_back(selected[j]);
        values.push_back(selected_values[j]);
      }
    }
  }

  // Writes the selected values. select_topk has cleared them in the residual; with fp16 values
  // the residual keeps the rounding error instead.
  void write_values(std::span<const uint32_t> indices, std::span<const float> values,
                    std::span<float> residual, std::byte* out) const {
    for (size_t j = 0; j < indices.size(); ++j) {
      if (!fp16()) {
        wire::store<float>(out + 4 * j, values[j]);
        continue;
      }
      const uint16_t h = float_to_fp16(std::clamp(values[j], -kFp16Max, kFp16Max));
      wire::store<uint16_t>(out + 2 * j, h);
      if (!residual.empty()) residual[indices[j]] = values[j] - fp16_to_float(h);
    }
  }

  static float value_at(const TopkPayload& p, size_t j) {
    return p.fp16 ? fp16_to_float(wire::load<uint16_t>(p.values + 2 * j))
                  : wire::load<float>(p.values + 4 * j);
  }

  Result<TopkPayload> parse_payload(const FrameView& frame) const {
    const uint64_t n = frame.header.element_count;
    const auto bytes = frame.payload;
    if (frame.header.flags & ~(kFlagBitmap | kFlagFp16)) return malformed(frame, "unknown flags");
    if (frame.header.param != 0) return malformed(frame, "unknown param");
    if (bytes.size() < kPrefixBytes) return malformed(frame, "payload shorter than its prefix");
    const uint64_t count = wire::load<uint32_t>(bytes.data());
    const uint64_t index_bytes = wire::load<uint32_t>(bytes.data() + 4);
    TopkPayload out;
    out.fp16 = frame.header.flags & kFlagFp16;
    const uint64_t value_size = out.fp16 ? 2 : 4;
    if (count > n) return malformed(frame, "more selected elements than the tensor has");
    if (kPrefixBytes + index_bytes + count * value_size != bytes.size()) {
      return malformed(frame, "payload length does not match its count and index length");
    }
    const std::byte* index_data = bytes.data() + kPrefixBytes;
    out.indices.reserve(count);
    if (frame.header.flags & kFlagBitmap) {
      if (index_bytes != (n + 7) / 8) return malformed(frame, "bitmap length is not ceil(n/8)");
      for (uint64_t byte = 0; byte < index_bytes; ++byte) {
        auto bits = static_cast<unsigned>(index_data[byte]);
        while (bits) {
          const uint64_t i = byte * 8 + static_cast<unsigned>(std::countr_zero(bits));
          if (i >= n) return malformed(frame, "bitmap sets a bit past the last element");
          if (out.indices.size() == count)
            return malformed(frame, "bitmap sets more bits than count");
          out.indices.push_back(static_cast<uint32_t>(i));
          bits &= bits - 1;
        }
      }
    } else {
      const std::byte* p = index_data;
      const std::byte* end = index_data + index_bytes;
      uint64_t next = 0;
      while (p < end) {
        uint64_t gap = 0;
        int shift = 0;
        for (;;) {
          if (p == end) return malformed(frame, "truncated index varint");
          const auto b = static_cast<uint64_t>(*p++);
          gap |= (b & 0x7F) << shift;
          if (!(b & 0x80)) break;
          shift += 7;
          if (shift >= 35) return malformed(frame, "index varint longer than 5 bytes");
        }
        const uint64_t i = next + gap;
        if (i >= n) return malformed(frame, "index " + std::to_string(i) + " out of range");
        if (out.indices.size() == count) return malformed(frame, "more indices than count");
        out.indices.push_back(static_cast<uint32_t>(i));
        next = i + 1;
      }
    }
    if (out.indices.size() != count) return malformed(frame, "fewer indices than count");
    out.values = index_data + index_bytes;
    for (size_t j = 0; j < count; ++j) {
      if (!std::isfinite(value_at(out, j))) return malformed(frame, "NaN or infinite value");
    }
    return out;
  }
};

}  // namespace

Result<std::unique_ptr<Codec>> make_topk_codec(const CodecParams& params) {
  return std::unique_ptr<Codec>(std::make_unique<TopkCodec>(params));
}

}  // namespace gradgate::kernels::cpu
