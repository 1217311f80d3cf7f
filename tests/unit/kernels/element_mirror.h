// A host mirror of the CUDA codecs' element-wise kernels (the same rules:: calls over the same
// tiles, threads, Philox blocks and checksum segments) and of their tiled frame checksum, and the
// CPU codecs to compare them with: for the tests that check the kernels' logic on the CPU
// (elementwise_rules_test.cc, crc32c_combine_test.cc).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "codec_test_util.h"
#include "gradgate/kernels/codec.h"
#include "gradgate/kernels/codec_spec.h"
#include "gradgate/kernels/crc32c.h"
#include "gradgate/kernels/crc32c_combine.h"
#include "gradgate/kernels/element_rules.h"
#include "gradgate/kernels/frame.h"
#include "gradgate/kernels/philox.h"
#include "gradgate/kernels/wire_io.h"

namespace gradgate::kernels::mirror {

using test_util::Bytes;

// ---- the kernels' checksum, mirrored ----------------------------------------------------------

inline const Crc32cZeros& zeros_table() {
  static const auto table = std::make_unique<Crc32cZeros>(make_crc32c_zeros());
  return *table;
}

inline const Crc32cSlices& slices_table() {
  static const auto table = std::make_unique<Crc32cSlices>(make_crc32c_slices());
  return *table;
}

// A kernel's tiles: kTileThreads (128) threads, each checksumming `segment_bytes` of a tile.
struct TileShape {
  uint32_t segment_bytes;
  uint32_t tile_bytes() const { return 128 * segment_bytes; }
};
inline constexpr TileShape kWideTiles{32};  // none, fp16, bf16, qsgd and their sums
inline constexpr TileShape kSignTiles{4};

// The frame's CRC32C as launch_seal_header and TileStage::fold_crc compute it: the seed from the
// header and `prefix_bytes` of payload, then every segment of every tile, shifted to the end.
inline uint32_t tiled_frame_crc(std::span<const std::byte> frame, size_t prefix_bytes,
                                TileShape shape) {
  const auto prefix = frame.subspan(kFrameHeaderBytes, prefix_bytes);
  const auto body = frame.subspan(kFrameHeaderBytes + prefix_bytes);
  const uint32_t before = crc32c_extend(crc32c(frame.first(44)), prefix);
  uint32_t crc = crc32c_seed(before, crc32c_zeros(body.size()));
  const Crc32cZeros& zeros = zeros_table();
  for (size_t offset = 0; offset < body.size(); offset += shape.tile_bytes()) {
    const auto tile_bytes =
        static_cast<uint32_t>(std::min<size_t>(shape.tile_bytes(), body.size() - offset));
    uint32_t tile = 0;
    for (uint32_t begin = 0; begin < tile_bytes; begin += shape.segment_bytes) {
      const uint32_t end = std::min(begin + shape.segment_bytes, tile_bytes);
      std::vector<uint32_t> words((end - begin + 3) / 4);
      std::memcpy(words.data(), body.data() + offset + begin, end - begin);
      const uint32_t reg = crc32c_register(slices_table(), words.data(), end - begin);
      tile ^= crc32c_multiply(slices_table(), reg, zeros.level[0][tile_bytes - end]);
    }
    const uint64_t after = body.size() - offset - tile_bytes;
    for (int l = 0; l < 3; ++l) {
      tile = crc32c_multiply(slices_table(), tile, zeros.level[l][Crc32cZeros::digit(after, l)]);
    }
    crc ^= tile;
  }
  return crc;
}

// ---- the kernels' element work, mirrored ------------------------------------------------------

inline constexpr uint32_t kJob = 3, kTensor = 7, kPolicy = 2;

inline FrameHeader header_for(CodecId codec, size_t n, uint64_t step, size_t payload,
                              uint32_t param = 0) {
  FrameHeader h;
  h.codec = codec;
  h.tensor_id = kTensor;
  h.job_id = kJob;
  h.step = step;
  h.element_count = n;
  h.policy_version = kPolicy;
  h.param = param;
  h.payload_bytes = static_cast<uint32_t>(payload);
  return h;
}

inline StepContext context_for(uint64_t step, uint32_t worker = 1, float agreed_scale = 0.0f) {
  StepContext ctx;
  ctx.step = step;
  ctx.policy_version = kPolicy;
  ctx.worker = worker;
  ctx.job_seed = 0x5EEDull;
  ctx.agreed_scale = agreed_scale;
  return ctx;
}

// A frame: header, then `payload` (written by the caller), then the tiled CRC.
struct MirrorFrame {
  Bytes bytes;
  size_t bad = 0;

  MirrorFrame(const FrameHeader& h) : bytes(kFrameHeaderBytes + h.payload_bytes) {
    write_frame_header(h, bytes);
  }
  std::byte* payload() { return bytes.data() + kFrameHeaderBytes; }
  void seal(size_t prefix_bytes, TileShape shape) {
    wire::store<uint32_t>(bytes.data() + 44, tiled_frame_crc(bytes, prefix_bytes, shape));
  }
};

// none_write_kernel: out = a (+ b).
inline MirrorFrame mirror_none(const FrameHeader& h, std::span<const float> a, const float* b) {
  MirrorFrame f(h);
  for (size_t i = 0; i < a.size(); ++i) {
    float v = a[i];
    f.bad += !rules::finite(v);
    if (b) {
      f.bad += !rules::finite(b[i]);
      v += b[i];
    }
    wire::store<float>(f.payload() + 4 * i, v);
  }
  f.seal(0, kWideTiles);
  return f;
}

// half_encode_kernel, then half_restore_kernel where the encode failed.
template <typename Format>
MirrorFrame mirror_half_encode(const FrameHeader& h, std::span<const float> g, float* e) {
  MirrorFrame f(h);
  std::vector<uint16_t> sent(g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    const float residual = e ? e[i] : 0.0f;
    const float v = rules::ef_value(g[i], e ? &residual : nullptr);
    sent[i] = rules::half_encode<Format>(v);
    wire::store<uint16_t>(f.payload() + 2 * i, sent[i]);
    if (e) e[i] = rules::residual_after(v, Format::decode(sent[i]), residual);
    f.bad += !rules::half_sendable<Format>(v, e != nullptr);
  }
  if (f.bad != 0 && e) {
    for (size_t i = 0; i < g.size(); ++i) {
      e[i] = rules::restored_residual(g[i], 0.0f + Format::decode(sent[i]), e[i]);
    }
  }
  f.seal(0, kWideTiles);
  return f;
}

// half_sum_kernel: counts bad values of a, b and the sum together.
template <typename Format>
MirrorFrame mirror_half_sum(const FrameHeader& h, const uint16_t* a, const uint16_t* b) {
  MirrorFrame f(h);
  for (size_t i = 0; i < h.element_count; ++i) {
    const uint16_t sum = rules::half_sum<Format>(a[i], b[i]);
    wire::store<uint16_t>(f.payload() + 2 * i, sum);
    f.bad += !rules::half_finite<Format>(a[i]) + !rules::half_finite<Format>(b[i]) +
             !rules::half_finite<Format>(sum);
  }
  f.seal(0, kWideTiles);
  return f;
}

// abs_stats_kernel (and abs_sum_kernel): the count of bad v, the largest kept |v|, the ordered sum.
struct Stats {
  size_t bad = 0;
  float max = 0.0f;
  double sum = 0.0;
};

inline Stats mirror_abs_stats(std::span<const float> g, const float* e) {
  Stats s;
  const size_t n = g.size();
  const size_t whole = n & ~size_t{7};
  std::vector<double> block_sums;
  for (size_t first = 0; first < n; first += rules::kSumBlock) {
    const size_t count = std::min<size_t>(rules::kSumBlock, n - first);
    std::vector<float> kept(count);
    for (size_t j = 0; j < count; ++j) {
      const float v = rules::ef_value(g[first + j], e ? e + first + j : nullptr);
      kept[j] = rules::kept_magnitude(v);
      s.bad += !rules::finite(v);
      s.max = std::max(s.max, kept[j]);
    }
    const size_t summed = first < whole ? std::min(whole - first, count) : 0;
    double block = 0.0;
    for (size_t lane = 0; lane < rules::kSumLanes; ++lane) {
      float lane_sum = 0.0f;
      for (size_t j = lane; j < summed; j += rules::kSumLanes) lane_sum += kept[j];
      block += lane_sum;
    }
    block_sums.push_back(block);
  }
  for (double block : block_sums) s.sum += block;
  for (size_t i = whole; i < n; ++i) {
    s.sum += rules::kept_magnitude(rules::ef_value(g[i], e ? e + i : nullptr));
  }
  return s;
}

// qsgd_encode_kernel over its tiles, threads and Philox blocks, then qsgd_restore_kernel where
// the encode failed.
template <typename Int>
MirrorFrame mirror_qsgd_encode(const FrameHeader& h, std::span<const float> g, float* e,
                               float scale, int levels, const rules::QsgdKey& key) {
  MirrorFrame f(h);
  wire::store<float>(f.payload(), scale);
  auto* out = reinterpret_cast<Int*>(f.payload() + 4);
  const rules::QsgdGrid grid = rules::qsgd_grid(scale, levels);
  const uint64_t n = g.size();
  const uint32_t tile_elements = kWideTiles.tile_bytes() / sizeof(Int);
  for (uint64_t first = 0; first < n; first += tile_elements) {
    const auto count = static_cast<uint32_t>(std::min<uint64_t>(tile_elements, n - first));
    for (uint32_t thread = 0; thread < 128; ++thread) {
      const uint32_t lane = thread % 8;
      for (uint32_t base = thread / 8 * 64; base < count; base += 1024) {
        const Philox4 bits = rules::qsgd_bits(philox_block(first + base + lane), key);
        for (uint32_t j = base + lane; j < base + 64 && j < count; j += 8) {
          const uint64_t i = first + j;
          const float residual = e ? e[i] : 0.0f;
          const float v = rules::ef_value(g[i], e ? &residual : nullptr);
          const int32_t level = rules::qsgd_level(v, rules::qsgd_uniform(bits, i), grid);
          out[i] = static_cast<Int>(level);
          if (e) e[i] = rules::residual_after(v, rules::qsgd_value(level, grid.to_value), residual);
          f.bad += !rules::finite(v);
        }
      }
    }
  }
  if (f.bad != 0 && e) {
    for (size_t i = 0; i < n; ++i) {
      e[i] = rules::restored_residual(g[i], 0.0f + rules::qsgd_value(out[i], grid.to_value), e[i]);
    }
  }
  f.seal(4, kWideTiles);
  return f;
}

// qsgd_sum_kernel: the scale of a, levels added.
template <typename Int>
MirrorFrame mirror_qsgd_sum(const FrameHeader& h, const std::byte* a, const std::byte* b) {
  MirrorFrame f(h);
  std::memcpy(f.payload(), a, 4);
  for (size_t i = 0; i < h.element_count; ++i) {
    const Int sum = rules::qsgd_sum(wire::load<Int>(a + 4 + i * sizeof(Int)),
                                    wire::load<Int>(b + 4 + i * sizeof(Int)));
    wire::store<Int>(f.payload() + 4 + i * sizeof(Int), sum);
  }
  f.seal(4, kWideTiles);
  return f;
}

// sign_encode_kernel: warps turn 32 elements into one little-endian bitmap word.
inline MirrorFrame mirror_sign_encode(const FrameHeader& h, std::span<const float> g, float* e,
                                      float scale) {
  MirrorFrame f(h);
  wire::store<float>(f.payload(), scale);
  std::byte* bitmap = f.payload() + 4;
  const uint64_t n = g.size();
  const uint64_t bitmap_bytes = (n + 7) / 8;
  for (uint64_t word = 0; word * 32 < n; ++word) {
    uint32_t value = 0;
    for (uint32_t lane = 0; lane < 32 && word * 32 + lane < n; ++lane) {
      const uint64_t i = word * 32 + lane;
      const float residual = e ? e[i] : 0.0f;
      const float v = rules::ef_value(g[i], e ? &residual : nullptr);
      const bool bit = rules::sign_bit(v);
      value |= static_cast<uint32_t>(bit) << lane;
      if (e) e[i] = rules::residual_after(v, rules::sign_value(bit, scale), residual);
    }
    for (uint64_t b = 0; b < 4 && word * 4 + b < bitmap_bytes; ++b) {
      bitmap[word * 4 + b] = static_cast<std::byte>(value >> (8 * b));
    }
  }
  f.seal(4, kSignTiles);
  return f;
}

// The decode kernels: out (= 0 when overwriting) + the decoded element.
template <typename Decode>
std::vector<float> mirror_decode(std::vector<float> out, bool overwrite, Decode decode) {
  for (size_t i = 0; i < out.size(); ++i) out[i] = (overwrite ? 0.0f : out[i]) + decode(i);
  return out;
}

// ---- the CPU codecs ---------------------------------------------------------------------------

struct CpuCodec {
  std::unique_ptr<Codec> codec;
  std::unique_ptr<Stream> stream;

  explicit CpuCodec(const std::string& spec, size_t n) {
    codec = make_cpu_codec(parse_codec_spec(spec).value()).value();
    stream = codec->make_stream(test_util::matrix_desc(1, n, kJob, kTensor)).value();
  }
  std::span<float> residual() { return stream->residual(); }
  // The frame, or an empty buffer when the encode failed.
  Bytes encode(std::span<const float> g, const StepContext& ctx) {
    auto frame = test_util::encode_frame(*codec, 0, ctx, g, *stream);
    return frame.ok() ? *frame : Bytes{};
  }
};

}  // namespace gradgate::kernels::mirror
